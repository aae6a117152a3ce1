"""Objects deleted behind the clients' backs, as an operator, a careless ``kubectl
delete`` or a ZooKeeper tool would: an election's Lease, a member's Lease, a store's
ConfigMap; a contender znode of a ZooKeeper election, a ZooKeeper store's znode tree.

The soak modules that import the kubernetes client and kazoo (import-linter allows them
here and in operator.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config

GROUP_LABEL = "kubecoord.dev/group"
STORE_LABEL = "kubecoord.dev/store"


class Deleter:
    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig), client_configuration=configuration
        )
        self._api = k8s.ApiClient(configuration)
        self._leases = k8s.CoordinationV1Api(self._api)
        self._core = k8s.CoreV1Api(self._api)
        self.namespace = namespace

    def close(self) -> None:
        self._api.close()  # type: ignore[no-untyped-call]

    def delete_lease(self, *, election: str, group: str, pick: int) -> str:
        """The election's Lease (even picks) or one member's Lease; returns what was deleted."""
        names = [election] if pick % 2 == 0 else []
        if not names:
            members = self._leases.list_namespaced_lease(self.namespace, label_selector=f"{GROUP_LABEL}={group}")
            names = sorted(_name(item) for item in members.items)
        if not names:
            return "nothing (no member Lease)"
        name = names[pick % len(names)]
        try:
            self._leases.delete_namespaced_lease(name, self.namespace)
        except k8s.ApiException as exc:
            if exc.status != 404:
                raise
            return f"lease/{name} (already gone)"
        return f"lease/{name}"

    def delete_configmap(self, *, store: str, pick: int) -> str:
        found = self._core.list_namespaced_config_map(self.namespace, label_selector=f"{STORE_LABEL}={store}")
        names = sorted(_name(item) for item in found.items)
        if not names:
            return "nothing (no ConfigMap yet)"
        name = names[pick % len(names)]
        try:
            self._core.delete_namespaced_config_map(name, self.namespace)
        except k8s.ApiException as exc:
            if exc.status != 404:
                raise
            return f"configmap/{name} (already gone)"
        return f"configmap/{name}"


def _name(item: object) -> str:
    return str(getattr(getattr(item, "metadata", None), "name", ""))


@contextlib.contextmanager
def _zookeeper(hosts: str) -> Iterator[Any]:
    """A client of its own, as a ZooKeeper tool run by hand would be; closed on leaving."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=hosts, timeout=10.0)
    client.start(timeout=30)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def delete_election_znode(hosts: str, path: str, pick: int) -> str:
    """A contender znode of the election at ``path`` deleted: the leader's (the lowest) on even
    picks, another's on odd ones; returns what was deleted."""
    with _zookeeper(hosts) as client:
        nodes = sorted(client.get_children(path), key=lambda node: node[-10:])  # by sequence number
        if not nodes:
            return "nothing (no contender)"
        node = nodes[0] if pick % 2 == 0 or len(nodes) == 1 else nodes[1 + pick % (len(nodes) - 1)]
        client.delete(f"{path}/{node}")
        role = "the leader's" if node == nodes[0] else "a follower's"
        return f"{role} znode {path}/{node}"


STORE_DELETE_ATTEMPTS = 20
"""Reads of a store's tree while writers prune it."""
STORE_DELETE_SECONDS = 30.0
"""How long deleting a store's tree is tried while writers keep adding keys to it."""


def delete_store_tree(hosts: str, path: str) -> str:
    """The store's root znode at ``path`` and every znode below it deleted in one
    transaction, deepest first (ZooKeeper deletes only leaves): the store vanishes at once,
    as a deleted ConfigMap does. A writer that adds a znode meanwhile fails the transaction
    (nothing is deleted): the failed deletes name the znodes that gained children or went,
    only those are read again, and it is tried again. Reading the whole tree again each time
    never caught up at load 9-15 with a writer adding a key every 20 ms: the tree grew
    faster than it was read. Returns what was deleted."""
    from kazoo.exceptions import NoNodeError, NotEmptyError

    with _zookeeper(hosts) as client:
        for _ in range(STORE_DELETE_ATTEMPTS):
            try:
                stat = client.exists(path)
                if stat is None:
                    return "nothing (no store znode yet)"
                tree = set(_tree(client, path))
                break
            except NoNodeError:
                continue  # pruned while read: read again
        else:
            raise RuntimeError(f"store {path}: pruned during {STORE_DELETE_ATTEMPTS} reads")
        # Tried until a deadline, not a count: each try loses only if a writer adds a znode
        # within its round trips, and at load 15 a count of 20 could run out.
        deadline, tries = time.monotonic() + STORE_DELETE_SECONDS, 0
        while time.monotonic() < deadline:
            tries += 1
            ordered = sorted(tree, key=lambda each: each.count("/"), reverse=True)
            transaction = client.transaction()
            for node in ordered:
                transaction.delete(node)
            results = transaction.commit()
            if not any(isinstance(result, Exception) for result in results):
                return f"store {path} (czxid {stat.czxid}): {len(tree)} znodes"
            for node, result in zip(ordered, results, strict=True):
                if isinstance(result, NoNodeError):  # deleted meanwhile, with what was below it
                    tree -= {each for each in tree if each == node or each.startswith(node + "/")}
                elif isinstance(result, NotEmptyError):  # new znodes below it
                    with contextlib.suppress(NoNodeError):
                        for child in client.get_children(node):
                            if f"{node}/{child}" not in tree:
                                tree.update(_tree(client, f"{node}/{child}"))
            if path not in tree:
                return "nothing (the store was deleted meanwhile)"
        raise RuntimeError(f"store {path}: writers changed it during {tries} tries in {STORE_DELETE_SECONDS} s")


def _tree(client: Any, path: str) -> list[str]:
    """``path`` and every znode below it."""
    nodes = [path]
    for child in client.get_children(path):
        nodes.extend(_tree(client, f"{path}/{child}"))
    return nodes
