"""etcd transactions as the JSON gateway spells them: compares, operations, the answer."""

from __future__ import annotations

from typing import Any

from kubecoord.backends.etcd.transport import Transport, b64
from kubecoord.backends.etcd.watches import Entry


def created(key: str, revision: int) -> dict[str, Any]:
    """Compare: ``key``'s create revision is ``revision`` (0: the key is absent)."""
    return {"key": b64(key), "result": "EQUAL", "target": "CREATE", "create_revision": str(revision)}


def modified(key: str, revision: int) -> dict[str, Any]:
    """Compare: ``key``'s mod revision is ``revision`` (0: the key is absent)."""
    return {"key": b64(key), "result": "EQUAL", "target": "MOD", "mod_revision": str(revision)}


def versioned(key: str, version: int) -> dict[str, Any]:
    """Compare: ``key``'s version is ``version`` (0: the key is absent)."""
    return {"key": b64(key), "result": "EQUAL", "target": "VERSION", "version": str(version)}


def valued(key: str, value: str | bytes) -> dict[str, Any]:
    """Compare: ``key``'s value is ``value`` (an absent key fails it)."""
    return {"key": b64(key), "result": "EQUAL", "target": "VALUE", "value": b64(value)}


def put(key: str, value: str | bytes, *, lease: int = 0) -> dict[str, Any]:
    body: dict[str, Any] = {"key": b64(key), "value": b64(value)}
    if lease:
        body["lease"] = str(lease)
    return {"request_put": body}


def delete(key: str) -> dict[str, Any]:
    return {"request_delete_range": {"key": b64(key)}}


def get(key: str) -> dict[str, Any]:
    return {"request_range": {"key": b64(key)}}


class Answer:
    """A transaction's answer: whether its compares held, its revision, what it read."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.succeeded = bool(raw.get("succeeded", False))
        self.revision = int(raw.get("header", {}).get("revision", 0))
        self._responses = raw.get("responses", [])

    def read(self, index: int) -> Entry | None:
        """The key read by the ``index``-th operation of the branch that ran (None: absent)."""
        kvs = self._responses[index].get("response_range", {}).get("kvs", []) if index < len(self._responses) else []
        return Entry.of(kvs[0]) if kvs else None


def run(
    transport: Transport,
    compare: list[dict[str, Any]],
    success: list[dict[str, Any]],
    failure: list[dict[str, Any]],
    *,
    idempotent: bool,
) -> Answer:
    """One transaction (Unanswered when a non-idempotent one's answer is lost)."""
    body = {"compare": compare, "success": success, "failure": failure}
    return Answer(transport.call("kv/txn", body, idempotent=idempotent))


def read(transport: Transport, key: str, *, revision: int = 0) -> Entry | None:
    """``key`` now (or at ``revision``), None when absent."""
    body: dict[str, Any] = {"key": b64(key)}
    if revision:
        body["revision"] = str(revision)
    kvs = transport.call("kv/range", body, idempotent=True).get("kvs", [])
    return Entry.of(kvs[0]) if kvs else None
