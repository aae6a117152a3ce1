"""The soak's zookeeper_delete_store on a real ZooKeeper: the store's whole tree goes at once,
while a writer keeps writing, and the writer's next put() starts a new incarnation."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

from kazoo.client import KazooClient

import kubecoord
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer
from kubecoord_testkit.soak.deletions import delete_store_tree


def test_a_store_tree_is_deleted_whole_while_a_writer_writes(zookeeper_server: ZooKeeperServer,
                                                             tmp_path: Path) -> None:
    chroot, log = f"/soak-delete-{uuid.uuid4().hex[:8]}", tmp_path / "writer.jsonl"
    root = f"{chroot}/kv/store"
    assert delete_store_tree(zookeeper_server.hosts, root) == "nothing (no store znode yet)"
    stopping = threading.Event()
    with kubecoord.connect(f"zookeeper://{zookeeper_server.hosts}{chroot}", history=log) as coord:
        kv = coord.storage("store")
        kv.put("deep/a/b", "1")
        kv.put("deep/c", "1")

        def write() -> None:  # new keys all the time: the deletion races with creations below it
            count = 0
            while not stopping.wait(0.02):  # a soak writer waits 0.1-0.4 s
                count += 1
                kv.put(f"busy/k{count}", "v")

        writer = threading.Thread(target=write)
        writer.start()
        try:
            deleted = delete_store_tree(zookeeper_server.hosts, root)
        finally:
            stopping.set()
            writer.join(30)
        assert deleted.startswith(f"store {root} (czxid ") and "znodes" in deleted
        assert kv.fetch("deep/c").result() is None, "the whole tree went, implicit parents included"
        assert kv.put("deep/c", "again") == 1
    zk = KazooClient(hosts=zookeeper_server.hosts)
    zk.start(timeout=10)
    try:
        assert zk.get_children(f"{root}/deep") == ["c"]  # nothing left of the old tree but the new key
    finally:
        zk.stop()
        zk.close()
    puts = [e for e in map(json.loads, log.read_text().splitlines()) if e["event"] == "put" and e["key"] == "deep/c"]
    assert [e["version"] for e in puts] == [1, 1]
    assert puts[0]["store_incarnation"] != puts[1]["store_incarnation"]
