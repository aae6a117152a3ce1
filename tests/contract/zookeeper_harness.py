"""The contract harness for zookeeper://: a real server, a fresh chroot per test.

crash() is what kill -9 does to a client: the TCP connection closes without a
CloseSession request, so the server keeps the session (and its ephemeral znodes) until
the session timeout. expire() waits that timeout out.
"""

from __future__ import annotations

import time
import uuid

from kazoo.client import KazooClient

from .harness import UrlHarness

SESSION_TIMEOUT = 2.0


class ZooKeeperHarness(UrlHarness):
    name = "zookeeper"
    settle = 10.0

    def __init__(self, hosts: str) -> None:
        self.hosts = hosts
        self.chroot = f"/contract-{uuid.uuid4().hex[:12]}"
        super().__init__(f"zookeeper://{hosts}{self.chroot}", lease_duration=SESSION_TIMEOUT)

    def delete_store(self, name: str) -> None:
        # The store's root znode and every key below it (ZooKeeper deletes only leaves:
        # kazoo deletes the tree bottom-up).
        client = KazooClient(hosts=self.hosts)
        client.start(timeout=10)
        try:
            client.delete(f"{self.chroot}/kv/{name}", recursive=True)
        finally:
            client.stop()
            client.close()

    def expire(self) -> None:
        # The server expires a silent session SESSION_TIMEOUT after its last contact,
        # checked every tick (200 ms); the contract's eventually() waits for the rest.
        time.sleep(SESSION_TIMEOUT)
