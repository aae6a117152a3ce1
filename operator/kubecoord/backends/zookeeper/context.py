"""What every handle of one ZooKeeper coordinator shares: its kazoo session, the
dispatcher thread that runs its listeners, the event log, the chroot and the options.

The handles take this, not the coordinator (as the Kubernetes backend's handles take
their KubernetesContext), so that they depend on what they use and the coordinator
module on them, not both ways.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubecoord._internal.dispatch import Dispatcher
from kubecoord.backends.zookeeper.options import Options
from kubecoord.backends.zookeeper.session import Session
from kubecoord.errors import ClosedError
from kubecoord.history import EventLog


@dataclass(eq=False)
class ZooKeeperContext:
    session: Session
    dispatcher: Dispatcher
    events: EventLog
    chroot: str
    options: Options
    closed: bool = False
    """Set by the coordinator's close() and simulate_crash() (under its lock)."""
    backend: str = "zookeeper"

    def check_open(self) -> None:
        if self.closed:
            raise ClosedError("this zookeeper coordinator was closed")
