"""Contract: the key-value store (KIP-30 Storage) with per-key versions, on every backend."""

from __future__ import annotations

import threading

import pytest

from kubecoord import (
    InvalidArgumentError,
    KeyExistsError,
    KeyNotFoundError,
    ValueTooLargeError,
    VersionConflictError,
    Versioned,
)

from ..helpers import eventually
from .harness import Harness

ROUND_TRIP_KEYS = [
    "plain",
    "topics/orders/config",
    "with space/and tab-free",
    "ünïcödé/ключ/キー/🔑",
    "UPPER.lower_mixed-123",
    "percent%2Fencoded",
    "a" * 200,
]
ROUND_TRIP_VALUES = ["", "x", "multi\nline\r\n", '{"json": [1, 2]}', "ünïcödé 🔑", "nul\x00inside", "a/b//c"]


@pytest.mark.parametrize("key", ROUND_TRIP_KEYS)
def test_keys_round_trip(harness: Harness, name: str, key: str) -> None:
    kv = harness.connect().storage(name)
    assert kv.put(key, "v") == 1
    assert kv.fetch(key).result() == "v"
    assert harness.connect().storage(name).fetch(key).result() == "v"


@pytest.mark.parametrize("value", ROUND_TRIP_VALUES)
def test_values_round_trip(harness: Harness, name: str, value: str) -> None:
    kv = harness.connect().storage(name)
    kv.put("k", value)
    assert harness.connect().storage(name).fetch("k").result() == value


def test_large_values_round_trip_up_to_the_backend_limit(harness: Harness, name: str) -> None:
    kv = harness.connect().storage(name)
    limit = kv.max_value_bytes
    assert limit >= 256 * 1024, "every backend stores values of at least 256 KiB"
    big = "é" * (limit // 2)  # two bytes each: exactly at (or one byte under) the limit
    kv.put("big", big)
    assert harness.connect().storage(name).fetch("big").result() == big
    with pytest.raises(ValueTooLargeError):
        kv.put("too-big", "x" * (limit + 1))
    with pytest.raises(ValueTooLargeError):
        kv.update("big", "x" * (limit + 1))
    assert kv.fetch("too-big").result() is None
    assert kv.fetch("big").result() == big
    one_mib = "m" * (1024 * 1024)
    try:
        kv.put("one-mib", one_mib)
    except ValueTooLargeError:
        assert limit < len(one_mib)
    else:
        assert kv.fetch("one-mib").result() == one_mib


@pytest.mark.parametrize("bad", ["", "/a", "a/", "a//b", "..", "a/../b", "./a", "a/.", "nul\x00", "new\nline"])
def test_invalid_keys_are_rejected_before_writing(harness: Harness, name: str, bad: str) -> None:
    kv = harness.connect().storage(name)
    with pytest.raises(InvalidArgumentError):
        kv.put(bad, "v")
    with pytest.raises(InvalidArgumentError):
        kv.fetch(bad)
    assert kv.children("") == set()


def test_put_is_create_only_update_must_exist(harness: Harness, name: str) -> None:
    kv = harness.connect().storage(name)
    assert kv.fetch("missing").result() is None
    assert kv.fetch_versioned("missing").result() is None
    with pytest.raises(KeyNotFoundError):
        kv.update("missing", "v")
    with pytest.raises(KeyNotFoundError):
        kv.delete("missing")
    assert kv.put("k", "v1") == 1
    with pytest.raises(KeyExistsError):
        kv.put("k", "other")
    assert kv.update("k", "v2") == 2
    assert kv.fetch_versioned("k").result() == Versioned("v2", 2)


def test_versions_and_compare_and_set(harness: Harness, name: str) -> None:
    kv = harness.connect().storage(name)
    other = harness.connect().storage(name)
    kv.put("k", "a")
    assert other.update("k", "b", expected_version=1) == 2
    with pytest.raises(VersionConflictError):
        kv.update("k", "c", expected_version=1)
    with pytest.raises(VersionConflictError):
        kv.delete("k", expected_version=1)
    assert kv.fetch_versioned("k").result() == Versioned("b", 2)
    kv.delete("k", expected_version=2)
    assert kv.fetch("k").result() is None
    assert kv.put("k", "again") == 1


def test_children_of_namespaces(harness: Harness, name: str) -> None:
    kv = harness.connect().storage(name)
    kv.put("topics/orders/config", "1")
    kv.put("topics/orders/partitions/0", "2")
    kv.put("topics/payments", "3")
    kv.put("brokers", "4")
    assert kv.children() == {"topics", "brokers"}
    assert kv.children("topics") == {"orders", "payments"}
    assert kv.children("topics/orders") == {"config", "partitions"}
    assert kv.children("nothing/here") == set()
    kv.delete("topics/orders/partitions/0")
    assert kv.children("topics/orders") == {"config"}
    kv.delete("topics/orders/config")
    assert kv.children("topics") == {"payments"}
    assert kv.fetch("topics/orders").result() is None


def test_concurrent_versioned_increments_lose_nothing(harness: Harness, name: str) -> None:
    harness.connect().storage(name).put("counter", "0")
    threads, per_thread = 8, harness.increments_per_thread
    conflicts = [0] * threads

    def increment(index: int) -> None:
        kv = harness.connect().storage(name)
        for _ in range(per_thread):
            while True:
                current = kv.fetch_versioned("counter").result()
                assert current is not None
                try:
                    kv.update("counter", str(int(current.value) + 1), expected_version=current.version)
                    break
                except VersionConflictError:
                    conflicts[index] += 1

    workers = [threading.Thread(target=increment, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    final = harness.connect().storage(name).fetch_versioned("counter").result()
    assert final == Versioned(str(threads * per_thread), threads * per_thread + 1)


def test_a_store_deleted_behind_its_clients_backs_starts_again_empty(harness: Harness, name: str) -> None:
    """Deleted behind its clients' backs (an administrator; the soak's delete_configmap and
    zookeeper_delete_store), a store is gone for them as a whole: no key is found, updates
    and deletes raise KeyNotFoundError, and the next put() re-creates the store with the
    key at version 1 — a new incarnation of the store, on every backend alike."""
    kv = harness.connect().storage(name)
    other = harness.connect().storage(name)
    kv.put("a", "1")
    assert kv.update("a", "2") == 2
    kv.put("ns/b", "1")
    eventually(lambda: other.fetch("ns/b").result() == "1", timeout=harness.settle)
    harness.delete_store(name)
    eventually(lambda: kv.fetch("a").result() is None and kv.children("") == set(), timeout=harness.settle)
    with pytest.raises(KeyNotFoundError):
        kv.update("a", "3")
    with pytest.raises(KeyNotFoundError):
        kv.delete("ns/b")
    assert kv.put("a", "again") == 1
    eventually(lambda: other.fetch_versioned("a").result() == Versioned("again", 1), timeout=harness.settle)
    assert other.update("a", "then", expected_version=1) == 2
    assert other.fetch("ns/b").result() is None


@pytest.mark.parametrize("max_age", [-1.0, -0.0001, float("nan"), float("inf"), "1", True])
def test_fetch_confirmed_rejects_a_bad_max_age(harness: Harness, name: str, max_age: object) -> None:
    with pytest.raises(InvalidArgumentError):
        harness.connect().storage(name).fetch_confirmed("k", max_age=max_age)  # type: ignore[arg-type]


def test_fetch_confirmed_with_max_age_zero_asks_the_server_now(harness: Harness, name: str) -> None:
    """No cache answers max_age=0: a write another client made just before is seen at once
    (no waiting for a watch), and the evidence is no older than the call."""
    writer, reader = harness.connect().storage(name), harness.connect().storage(name)
    writer.put("other", "x")
    eventually(lambda: reader.fetch("other").result() == "x", harness.settle)  # the reader's cache is warm
    for version in range(1, 4):
        if version == 1:
            writer.put("k", "v1")
        else:
            writer.update("k", f"v{version}")
        asked = harness.now()
        versioned, moment = reader.fetch_confirmed("k", max_age=0)
        assert versioned == Versioned(f"v{version}", version)
        assert asked <= moment <= harness.now()


def test_fetch_confirmed_answers_what_the_server_vouched_for_and_when(harness: Harness, name: str) -> None:
    writer, reader = harness.connect().storage(name), harness.connect().storage(name)
    before = harness.now()
    value, moment = reader.fetch_confirmed("k", max_age=5.0)
    assert value is None and moment == pytest.approx(before, abs=5.0)
    writer.put("k", "v1")
    writer.update("k", "v2")
    eventually(lambda: reader.fetch_versioned("k").result() == Versioned("v2", 2), harness.settle)
    asked = harness.now()
    versioned, confirmed_at = reader.fetch_confirmed("k", max_age=5.0)
    assert versioned == Versioned("v2", 2)
    assert asked - 5.0 <= confirmed_at <= harness.now()
