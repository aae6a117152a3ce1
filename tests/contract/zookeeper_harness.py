"""The contract harness for zookeeper://: a real server, a fresh chroot per test.

crash() is what kill -9 does to a client: the TCP connection closes without a
CloseSession request, so the server keeps the session (and its ephemeral znodes) until
the session timeout. expire() waits that timeout out.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import kubecoord
from kubecoord import Coordinator
from kubecoord.testing import crash

from .harness import Harness

SESSION_TIMEOUT = 2.0


class ZooKeeperHarness(Harness):
    name = "zookeeper"
    settle = 10.0

    def __init__(self, hosts: str) -> None:
        self.url = f"zookeeper://{hosts}/contract-{uuid.uuid4().hex[:12]}"
        self.coordinators: list[Coordinator] = []

    def connect(self, **options: Any) -> Coordinator:
        options.setdefault("session_timeout", SESSION_TIMEOUT)
        coordinator = kubecoord.connect(self.url, **options)
        self.coordinators.append(coordinator)
        return coordinator

    def crash(self, coordinator: Coordinator) -> None:
        crash(coordinator)

    def expire(self) -> None:
        # The server expires a silent session SESSION_TIMEOUT after its last contact,
        # checked every tick (200 ms); the contract's eventually() waits for the rest.
        time.sleep(SESSION_TIMEOUT)

    def close(self) -> None:
        for coordinator in self.coordinators:
            coordinator.close()
