"""Object names (kubecoord.wire.object_names) and the ConfigMap key encoding (kubecoord.wire.kv_entries)."""

from __future__ import annotations

import re

import pytest

from kubecoord.wire import object_names
from kubecoord.wire.kv_entries import (
    CONFIGMAP_KEY,
    MAX_CONFIGMAP_KEY,
    Entry,
    decode_key,
    dump_entry,
    encode_key,
    load_entries,
)

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

KEYS = [
    "plain", "topics/orders/config", "with space/and tab-free", "ünïcödé/ключ/キー/🔑", "UPPER.lower_mixed-123",
    "percent%2Fencoded", "a" * 200, "_h.looks-hashed", "..x/y..", "-leading", "x" * 511 + "é"[:1], "a/b" * 100,
]


def _valid_configmap_key(key: str) -> bool:
    return bool(CONFIGMAP_KEY.match(key)) and len(key) <= MAX_CONFIGMAP_KEY and key not in (".", "..") \
        and not key.startswith("..")


@pytest.mark.parametrize("key", KEYS)
def test_keys_encode_to_valid_configmap_keys_and_back(key: str) -> None:
    encoded = encode_key(key)
    assert _valid_configmap_key(encoded), encoded
    decoded = decode_key(encoded)
    if decoded is None:
        assert encoded.startswith("_h.") and len(key.encode()) > MAX_CONFIGMAP_KEY // 3
    else:
        assert decoded == key


def test_encoding_is_injective_on_tricky_pairs() -> None:
    pairs = [("a/b", "a.b"), ("a_b", "a_5fb"), ("a.b", "a_2eb"), ("x" * 300, "x" * 301)]
    for one, two in pairs:
        assert encode_key(one) != encode_key(two), (one, two)


def test_entries_round_trip_and_foreign_data_is_skipped() -> None:
    entries = [Entry("topics/ü", "multi\nline\x00", 3), Entry("k" * 400, "v", 1)]
    data = {encode_key(e.key): dump_entry(e) for e in entries}
    data["foreign"] = "not json"
    data["other"] = '{"k": "elsewhere", "v": 1, "d": "x"}'  # key does not match its data key
    assert load_entries(data) == {e.key: e for e in entries}


def test_member_lease_names_are_valid_and_injective() -> None:
    ids = ["w1", "W1", "w-1", "w_1", "ünï", "a" * 128, "a" * 127 + "b", "..", "x y"]
    names = {object_names.member_lease_name("workers", member) for member in ids}
    assert len(names) == len(ids)
    longest = object_names.member_lease_name("g" * 63, "z" * 128)
    for name in [*names, longest]:
        assert DNS_SUBDOMAIN.match(name) and len(name) <= object_names.MAX_OBJECT_NAME, name
        assert "." in name  # never an election Lease name (those are DNS labels)
    assert object_names.election_lease_name("billing") == "billing"
    assert DNS_SUBDOMAIN.match(object_names.store_configmap_name("s" * 63))
