"""KV stores over several ConfigMaps (kubecoord.wire.kv_shards), on the API emulator:
layout, exact listings and listeners across shards, one shard per single-key write, stores
beyond 1 MiB, by-name RBAC, and writes that do not grow a store over its limit."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from kubecoord import PermissionDeniedError, StoreFullError, Versioned
from kubecoord.backends.kubernetes.kv import KubeStorage
from kubecoord.wire import object_names
from kubecoord.wire.kv_shards import shard_count_for, shard_of
from kubecoord_testkit.emulator import ApiEmulator
from tests.helpers import Recorder, eventually

from .conftest import Connect, grant, kubeconfig_for

KV_VERBS = ["get", "list", "watch", "update", "patch"]


def _configmaps(api: ApiEmulator, store: str) -> dict[str, dict[str, Any]]:
    return {
        obj["metadata"]["name"]: obj
        for obj in api.objects("configmaps", "default")
        if (obj["metadata"].get("labels") or {}).get(object_names.STORE_LABEL) == store
    }


def test_keys_live_in_the_shard_their_hash_picks_and_the_count_is_recorded(
    api_emulator: ApiEmulator, connect: Connect, name: str
) -> None:
    kv = connect(kv_shards=4).storage(name)
    keys = [f"topics/t{i}/config" for i in range(40)]
    for key in keys:
        kv.put(key, key.upper())
    configmaps = _configmaps(api_emulator, name)
    assert set(configmaps) == set(object_names.store_shard_names(name, 4))
    shard_zero = configmaps[object_names.store_configmap_name(name)]
    assert shard_zero["metadata"]["annotations"][object_names.KV_SHARDS_ANNOTATION] == "4"
    for index, shard in enumerate(object_names.store_shard_names(name, 4)):
        stored = {json.loads(text)["k"] for text in (configmaps[shard].get("data") or {}).values()}
        assert stored == {key for key in keys if shard_of(key, 4) == index}
    assert len({shard_of(key, 4) for key in keys}) == 4  # 40 keys reach every shard

    # Another client, asking for one shard, follows the recorded count.
    other = connect(kv_shards=1).storage(name)
    assert other.children("topics") == {f"t{i}" for i in range(40)}
    assert other.update("topics/t7/config", "new", expected_version=1) == 2
    eventually(lambda: kv.fetch_versioned("topics/t7/config").result() == Versioned("new", 2))  # by its watch
    assert set(_configmaps(api_emulator, name)) == set(object_names.store_shard_names(name, 4))


def test_a_single_key_write_sends_one_shard(api_emulator: ApiEmulator, connect: Connect, name: str) -> None:
    kv = connect(kv_shards=8).storage(name)
    for i in range(64):
        kv.put(f"k{i}", "x" * 1000)
    api_emulator.reset_requests()
    kv.update("k5", "y" * 1000)
    writes = [r for r in api_emulator.requests if r.verb in ("create", "update", "patch", "delete")]
    assert [(r.verb, r.name) for r in writes] == [("update", object_names.store_shard_name(name, shard_of("k5", 8)))]


def test_a_store_of_eight_mebibytes_works(connect: Connect, name: str) -> None:
    kv = connect(kv_shards=shard_count_for(8 * 1024 * 1024), max_value_bytes=64 * 1024).storage(name)
    value = "v" * (64 * 1024 - 64)
    count = 8 * 16  # 128 x ~64 KiB = 8 MiB of values
    for i in range(count):
        kv.put(f"blob/{i}", value)
    reader = connect().storage(name)
    assert reader.children("blob") == {str(i) for i in range(count)}
    assert reader.fetch(f"blob/{count - 1}").result() == value


def test_key_set_listeners_are_exact_across_shards(connect: Connect, name: str) -> None:
    registry = connect().listener_registry(name)  # registered before the store exists
    children: Recorder[set[str]] = Recorder()
    registry.add_key_set_change_listener("a", children)
    kv = connect(kv_shards=5).storage(name)
    names = [f"n{i}" for i in range(12)]
    for child in names:
        kv.put(f"a/{child}", "1")
    children.wait_last(set(names))
    for child in names[:6]:
        kv.delete(f"a/{child}")
    children.wait_last(set(names[6:]))
    kv.put("b/elsewhere", "1")
    values: Recorder[str | None] = Recorder()
    registry.add_value_change_listener("a/n9", values)
    kv.update("a/n9", "2")
    values.wait_last("2")
    assert registry is not None and children.calls[-1] == set(names[6:])


def test_clients_granted_by_name_can_use_every_shard(
    api_emulator: ApiEmulator, admin_api: Any, connect: Connect, name: str, tmp_path: pathlib.Path
) -> None:
    # The operator creates the shards up front; a client has rights on exactly those names.
    admin = connect(kv_shards=3).storage(name)
    admin.put("seed", "0")
    for index in range(3):
        if object_names.store_shard_name(name, index) not in _configmaps(api_emulator, name):
            admin.put(next(f"fill{i}" for i in range(100) if shard_of(f"fill{i}", 3) == index), "0")
    account = f"sa-{name}"
    rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": KV_VERBS,
            "resourceNames": object_names.store_shard_names(name, 3)}
    grant(admin_api, account, [rule])
    token = api_emulator.token_for_service_account("default", account)
    client = connect(kubeconfig=kubeconfig_for(api_emulator, tmp_path, token))
    kv = client.storage(name)
    seen: Recorder[set[str]] = Recorder()
    client.listener_registry(name).add_key_set_change_listener("", seen)
    for i in range(10):
        kv.put(f"app{i}", "1")
    assert kv.update("app3", "2") == 2
    seen.wait_last(kv.children(""))
    assert {f"app{i}" for i in range(10)} <= kv.children("")
    other = connect(kubeconfig=kubeconfig_for(api_emulator, tmp_path, token)).storage(f"{name}-other")
    with pytest.raises(PermissionDeniedError):
        other.fetch("x")


def test_deletes_and_shrinking_updates_go_through_when_a_store_is_over_its_limit(
    connect: Connect, name: str
) -> None:
    context = connect()._context  # type: ignore[attr-defined]
    roomy = KubeStorage(context, name, size_limit=64 * 1024)
    for i in range(3):
        roomy.put(f"k{i}", "x" * 8000)
    # The KVStore's sizeLimit was lowered below what the store holds.
    tight = KubeStorage(context, name, size_limit=4 * 1024)
    tight.delete("k0")  # still over the limit afterwards, but smaller
    assert tight.update("k1", "x" * 10) == 2  # shrinks
    with pytest.raises(StoreFullError, match="sizeLimit"):
        tight.update("k1", "x" * 20)  # grows while over
    with pytest.raises(StoreFullError, match="sizeLimit"):
        tight.put("new", "x")
    assert tight.fetch("new").result() is None
    eventually(lambda: roomy.children("") == {"k1", "k2"})
