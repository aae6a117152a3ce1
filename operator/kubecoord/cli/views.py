"""The state a command shows, read through the public interface, as plain documents.

One function per primitive returns a JSON-ready dict; ``rows_of`` turns it into table
rows. The one-shot commands and ``watch`` share them, so a table and its live view agree;
they read the handles of the public interface (kubecoord.api) and the one-shot
snapshots of kubernetes:// (snapshot.py) alike, through the small protocols below.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

Document = dict[str, Any]
T_co = TypeVar("T_co", covariant=True)


class LeaderLike(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def data(self) -> str: ...
    @property
    def epoch(self) -> int: ...


class ElectionLike(Protocol):
    """What leader() reads: kubecoord.api.LeaderElection, or snapshot.ElectionSnapshot."""

    @property
    def service(self) -> str: ...
    def get_leader(self) -> LeaderLike | None: ...


class GroupLike(Protocol):
    """What members() reads: kubecoord.api.GroupMembership, or snapshot.GroupSnapshot."""

    @property
    def group(self) -> str: ...
    def membership(self) -> dict[str, str]: ...


class VersionedLike(Protocol):
    @property
    def value(self) -> str: ...
    @property
    def version(self) -> int: ...


class Pending(Protocol[T_co]):
    """A Future, or an answer already read."""

    def result(self, timeout: float | None = None) -> T_co: ...


class StoreLike(Protocol):
    """What keys() reads: kubecoord.api.Storage, or snapshot.StoreSnapshot."""

    @property
    def name(self) -> str: ...
    def children(self, namespace: str = "") -> set[str]: ...
    def fetch_versioned(self, key: str) -> Pending[VersionedLike | None]: ...


def leader(election: ElectionLike) -> Document:
    current = election.get_leader()
    return {
        "election": election.service,
        "leader": current.id if current else None,
        "epoch": current.epoch if current else None,
        "data": current.data if current else None,
    }


def leader_table(document: Document) -> tuple[list[str], list[list[Any]]]:
    return ["ELECTION", "LEADER", "EPOCH", "DATA"], [
        [document["election"], document["leader"], document["epoch"], document["data"]]
    ]


def members(group: GroupLike) -> Document:
    current = group.membership()
    return {
        "group": group.group,
        "members": [{"id": member, "data": current[member]} for member in sorted(current)],
    }


def members_table(document: Document) -> tuple[list[str], list[list[Any]]]:
    return ["MEMBER", "DATA"], [[member["id"], member["data"]] for member in document["members"]]


def join_key(namespace: str, name: str) -> str:
    return f"{namespace.rstrip('/')}/{name}" if namespace.strip("/") else name


def keys(storage: StoreLike, namespace: str = "", *, recursive: bool = False, timeout: float) -> Document:
    """Every key under ``namespace`` with its value and version; a name that only has
    children (no value of its own) is listed as a namespace when not recursing."""
    entries: list[Document] = []
    pending = [namespace]
    while pending:
        parent = pending.pop()
        names = sorted(storage.children(parent))
        reads: list[tuple[str, Pending[VersionedLike | None]]] = [
            (join_key(parent, name), storage.fetch_versioned(join_key(parent, name))) for name in names
        ]
        for path, future in reads:
            versioned = future.result(timeout)
            if versioned is not None:
                entries.append({"key": path, "value": versioned.value, "version": versioned.version})
            if recursive:
                pending.append(path)
            elif versioned is None:
                entries.append({"key": path + "/", "value": None, "version": None})
    entries.sort(key=lambda entry: entry["key"])
    return {"store": storage.name, "namespace": namespace, "keys": entries}


def keys_table(document: Document, *, wide: bool = False) -> tuple[list[str], list[list[Any]]]:
    """KEY, VERSION, VALUE; ``wide`` adds SIZE (the value's bytes in UTF-8) before VALUE."""
    def size(entry: Document) -> list[Any]:
        return [len(entry["value"].encode()) if entry["value"] is not None else "-"] if wide else []

    return ["KEY", "VERSION", *(["SIZE"] if wide else []), "VALUE"], [
        [entry["key"], entry["version"] if entry["version"] is not None else "-", *size(entry), entry["value"] or ""]
        for entry in document["keys"]
    ]
