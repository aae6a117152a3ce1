"""What every handle of one etcd coordinator shares: its transport, its lease session, the
dispatcher thread that runs its listeners, the event log, the options, the key root, and
which candidate keys of its lease are taken (one lease, several candidates per name).

The handles take this, not the coordinator, as the other backends' handles take theirs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from kubecoord._internal.dispatch import Dispatcher
from kubecoord.backends.etcd.options import Options
from kubecoord.backends.etcd.session import LeaseSession
from kubecoord.backends.etcd.transport import Transport
from kubecoord.backends.etcd.watches import PrefixView
from kubecoord.errors import ClosedError
from kubecoord.history import EventLog


@dataclass(eq=False)
class EtcdContext:
    transport: Transport
    session: LeaseSession
    dispatcher: Dispatcher
    events: EventLog
    options: Options
    root: str
    """The URL's PREFIX as a key prefix: '' or 'PREFIX/'."""
    closed: bool = False
    crashed: bool = False
    backend: str = "etcd"
    _slots: dict[str, set[int]] = field(default_factory=dict)
    _slots_lock: threading.Lock = field(default_factory=threading.Lock)

    def check_open(self) -> None:
        if self.closed:
            raise ClosedError("this etcd coordinator was closed")

    def claim_slot(self, name: str) -> int:
        """A number no other live candidate of this lease uses in election ``name``: 0
        names the key ``NAME/<lease hex>`` (etcd's own layout), N > 0 ``NAME/<lease hex>_N``."""
        with self._slots_lock:
            taken = self._slots.setdefault(name, set())
            slot = next(n for n in range(len(taken) + 1) if n not in taken)
            taken.add(slot)
            return slot

    def release_slot(self, name: str, slot: int) -> None:
        with self._slots_lock:
            self._slots.get(name, set()).discard(slot)

    def internal(self, *parts: str) -> str:
        """A key under this root's ``_kubecoord/`` (no election name can start with '_')."""
        return self.root + "_kubecoord/" + "/".join(parts)

    def watch_prefix(self, prefix: str, changed: Callable[[PrefixView], None], name: str) -> PrefixView:
        """A started PrefixView of ``prefix``, the one way every handle watches: a stream
        silent for the lease duration (at least 5 s) is taken for stalled and resumed."""
        return PrefixView(self.transport, prefix, changed, read_timeout=max(5.0, float(self.options.lease_duration)),
                          name=name)
