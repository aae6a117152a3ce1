"""etcd with authentication on (etcd's root user): the username/password options get a
token; a wrong password and a missing user are PermissionDeniedError, from connect() or
from the first request etcd refuses, never a BackendUnavailableError to retry."""

from __future__ import annotations

import uuid

import pytest

import kubecoord
from kubecoord.errors import PermissionDeniedError
from kubecoord_testkit.servers.etcd import EtcdCluster
from tests.fixtures.etcd import ETCD_ROOT_PASSWORD


def test_the_right_password_works_and_a_wrong_one_is_refused(etcd_with_auth: EtcdCluster) -> None:
    url = f"etcd://{etcd_with_auth.hosts}/auth-{uuid.uuid4().hex[:8]}"
    with kubecoord.connect(url, username="root", password=ETCD_ROOT_PASSWORD, lease_duration=3) as coordinator:
        store = coordinator.storage("s")
        store.put("k", "v")
        assert store.fetch("k").result(timeout=10) == "v"
        assert coordinator.leader_election("e").nominate("a")
    with pytest.raises(PermissionDeniedError, match=r"etcd refused user 'root'.*authentication failed"):
        kubecoord.connect(url, username="root", password="not-it", lease_duration=3)


def test_no_user_on_an_etcd_that_requires_one_is_refused(etcd_with_auth: EtcdCluster) -> None:
    url = f"etcd://{etcd_with_auth.hosts}/auth-{uuid.uuid4().hex[:8]}"
    with (
        pytest.raises(PermissionDeniedError, match="user name is empty"),
        kubecoord.connect(url, lease_duration=3) as coordinator,  # etcd refuses the session's lease grant
    ):
        coordinator.storage("s").put("k", "v")
