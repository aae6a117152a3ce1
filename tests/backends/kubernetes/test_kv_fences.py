"""Fenced writes on kubernetes://: the marks live in the annotation kubecoord.dev/kv-fences
of the key's ConfigMap shard (kubecoord.wire.fences, format 1), so their scope is the shard."""

from __future__ import annotations

import json
import pathlib

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from kubecoord import Fence, FencedError, UnsupportedFeatureError, Versioned
from kubecoord.wire import fences, object_names
from kubecoord.wire.kv_shards import shard_of
from kubecoord_testkit.emulator import ApiEmulator

from .conftest import Connect


def _annotations(api: ApiEmulator, configmap: str) -> dict[str, str]:
    [obj] = [o for o in api.objects("configmaps", "default") if o["metadata"]["name"] == configmap]
    return dict(obj["metadata"].get("annotations") or {})


def test_the_marks_are_the_shards_annotation_and_scoped_to_the_shard(
    api_emulator: ApiEmulator, connect: Connect, name: str
) -> None:
    kv = connect(kv_shards=4).storage(name)
    keys = [f"k{i}" for i in range(40)]
    first = next(key for key in keys if shard_of(key, 4) == 1)
    same = next(key for key in keys if shard_of(key, 4) == 1 and key != first)
    other = next(key for key in keys if shard_of(key, 4) == 2)
    kv.put(first, "new holder", fence=Fence("job", 7))
    shard = object_names.store_shard_name(name, 1)
    assert json.loads(_annotations(api_emulator, shard)[fences.ANNOTATION]) == {"format": 1, "tokens": {"job": 7}}
    with pytest.raises(FencedError):
        kv.put(same, "stale", fence=Fence("job", 6))  # the same shard: fenced
    assert kv.put(other, "stale", fence=Fence("job", 6)) == 1  # another shard has its own marks
    assert fences.ANNOTATION not in _annotations(api_emulator, object_names.store_shard_name(name, 0))


def test_marks_of_an_unknown_format_refuse_fenced_writes_and_survive_unfenced_ones(
    api_emulator: ApiEmulator, connect: Connect, name: str, kubeconfig_path: pathlib.Path
) -> None:
    kv = connect().storage(name)
    kv.put("k", "v", fence=Fence("job", 1))
    shard = object_names.store_shard_name(name, 0)
    future = '{"format":2,"marks":[]}'
    with k8s_config.new_client_from_config(config_file=str(kubeconfig_path)) as api:  # type: ignore[no-untyped-call]  # kubernetes.config is unannotated
        k8s.CoreV1Api(api).patch_namespaced_config_map(
            shard, "default", {"metadata": {"annotations": {fences.ANNOTATION: future}}}
        )
    with pytest.raises(UnsupportedFeatureError, match="format 2"):
        kv.update("k", "fenced", fence=Fence("job", 9))
    assert kv.update("k", "unfenced") == 2  # kept untouched by a write that carries no fence
    assert _annotations(api_emulator, shard)[fences.ANNOTATION] == future
    assert kv.fetch_versioned("k").result() == Versioned("unfenced", 2)
