"""A KVStore larger than one ConfigMap: the operator creates every shard up front, grants
them by name, and a client holding only that grant uses the whole store."""

from __future__ import annotations

import pathlib

import kubecoord
from kubecoord.wire import object_names
from kubecoord.wire.kv_shards import shard_count_for, shard_of
from kubecoord_testkit.emulator import ApiEmulator
from tests.helpers import eventually
from tests.operator.conftest import NAMESPACE, Resources


def test_a_sharded_store_is_created_granted_by_name_and_usable_by_its_clients(
    resources: Resources, api: ApiEmulator, unique: str, tmp_path: pathlib.Path
) -> None:
    name = f"big-{unique}"
    shards = shard_count_for(2 * 1024 * 1024)
    account = f"kv-{unique}"
    resources.core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": account}})
    resources.create("kvstores", "KVStore", name, {"sizeLimit": "2Mi", "clients": [account]})
    resources.wait_ready("kvstores", name)
    names = object_names.store_shard_names(name, shards)
    role_name = f"kubecoord-kvstore-{name}"
    eventually(lambda: set(names) <= resources.configmap_names() and role_name in resources.role_names())
    zero = resources.core.read_namespaced_config_map(names[0], NAMESPACE)
    assert zero.metadata.annotations[object_names.KV_SHARDS_ANNOTATION] == str(shards)
    role = resources.rbac.read_namespaced_role(role_name, NAMESPACE)
    assert [sorted(r.resource_names or []) for r in role.rules if r.resources == ["configmaps"]] == [sorted(names)]

    token = api.token_for_service_account(NAMESPACE, account)
    kubeconfig = api.write_kubeconfig(tmp_path / "client", namespace=NAMESPACE, token=token)
    with kubecoord.connect(f"kubernetes://{NAMESPACE}", kubeconfig=str(kubeconfig)) as client:
        kv = client.storage(name)
        keys = [f"k{i}" for i in range(24)]
        assert len({shard_of(key, shards) for key in keys}) == shards
        for key in keys:
            kv.put(key, "x" * 20_000)  # 480 KB over the shards
        assert kv.children() == set(keys)
    eventually(lambda: resources.status("kvstores", name).get("keys") == len(keys), timeout=30)

    # A sizeLimit change never changes the recorded shard count (keys would move).
    resources.custom.patch_namespaced_custom_object(
        "kubecoord.dev", "v1alpha1", NAMESPACE, "kvstores", name, {"spec": {"sizeLimit": "8Mi"}}
    )

    def handled() -> bool:  # the status of the new generation is written after its spec is
        body = resources.get("kvstores", name) or {}
        generation = body.get("metadata", {}).get("generation")
        return bool(generation and (body.get("status") or {}).get("observedGeneration") == generation)

    eventually(handled, timeout=30)
    zero = resources.core.read_namespaced_config_map(names[0], NAMESPACE)
    assert zero.metadata.annotations[object_names.KV_SHARDS_ANNOTATION] == str(shards)
    resources.delete("kvstores", name)
    eventually(lambda: not set(names) & resources.configmap_names(), timeout=30)
