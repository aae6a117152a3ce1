"""The contract harness for kubernetes://: coordinators on the session's API emulator.

Short timings (lease 4 s, renew deadline 3 s, retry 1 s) so expiry takes seconds;
every test uses fresh object names (the ``name`` fixture), so tests share one emulator
and its ``default`` namespace without colliding. crash() is the coordinator's
simulate_crash() test hook: it stops renewing and watching without releasing anything.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

import kubecoord
from kubecoord import Coordinator
from kubecoord.testing import crash

from .harness import Harness

# Short enough that expiry takes seconds, long enough that a leader on a loaded 2-core
# machine (other suites running) still renews within its deadline: three tries per term.
LEASE_DURATION = 4.0
RENEW_DEADLINE = 3.0
RETRY_PERIOD = 1.0


class KubernetesHarness(Harness):
    name = "kubernetes"
    settle = 15.0

    def __init__(self, kubeconfig: pathlib.Path, namespace: str = "default") -> None:
        self.kubeconfig = kubeconfig
        self.url = f"kubernetes://{namespace}"
        self.coordinators: list[Coordinator] = []

    def connect(self, **options: Any) -> Coordinator:
        options.setdefault("kubeconfig", str(self.kubeconfig))
        options.setdefault("lease_duration", LEASE_DURATION)
        options.setdefault("renew_deadline", RENEW_DEADLINE)
        options.setdefault("retry_period", RETRY_PERIOD)
        coordinator = kubecoord.connect(self.url, **options)
        self.coordinators.append(coordinator)
        return coordinator

    def crash(self, coordinator: Coordinator) -> None:
        crash(coordinator)

    def expire(self) -> None:
        # Followers count the lease from when they last saw it change: wait it out.
        time.sleep(LEASE_DURATION + 0.5)

    def close(self) -> None:
        for coordinator in self.coordinators:
            coordinator.close()
