"""Declared capabilities (kubecoord.capabilities): who has them, and the error for who has not."""

from __future__ import annotations

import pytest

import kubecoord
from kubecoord.backends.cassandra.coordinator import CassandraCoordinator
from kubecoord.backends.kubernetes import KubernetesCoordinator
from kubecoord.backends.zookeeper.coordinator import ZooKeeperCoordinator
from kubecoord.capabilities import ObjectCache, Purgeable, StateCache, require


def test_backends_declare_what_they_have() -> None:
    assert issubclass(ZooKeeperCoordinator, Purgeable) and not issubclass(ZooKeeperCoordinator, ObjectCache)
    assert issubclass(CassandraCoordinator, Purgeable) and not issubclass(CassandraCoordinator, ObjectCache)
    assert issubclass(KubernetesCoordinator, ObjectCache) and not issubclass(KubernetesCoordinator, Purgeable)
    assert issubclass(KubernetesCoordinator, StateCache)
    assert not issubclass(ZooKeeperCoordinator, StateCache) and not issubclass(CassandraCoordinator, StateCache)


def test_a_missing_capability_names_the_feature_and_the_backend() -> None:
    with kubecoord.connect("memory://capabilities") as coord:
        assert not isinstance(coord, Purgeable) and not isinstance(coord, ObjectCache)
        assert not isinstance(coord, StateCache)
        with pytest.raises(kubecoord.UnsupportedFeatureError) as raised:
            require(coord, Purgeable)  # type: ignore[type-abstract]  # mypy#4717: a Protocol is a fine type[C] here
    assert raised.value.backend == "memory" and "purge" in raised.value.feature
    assert str(raised.value) == "backend 'memory' does not support purging a primitive's backend objects (purge)"
