"""The contract harness for kubernetes://: coordinators on the session's API emulator.

Short timings (lease 2 s, renew deadline 1.5 s, retry 0.5 s) so expiry takes seconds;
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

LEASE_DURATION = 2.0
RENEW_DEADLINE = 1.5
RETRY_PERIOD = 0.5


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
