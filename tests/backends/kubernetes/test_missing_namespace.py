"""A kubernetes:// coordinator whose namespace does not exist, on the emulator and the real
server: the first write raises NamespaceNotFoundError at once. Before, ``put`` sent some
200 requests before giving up with a misleading conflict error, ``join`` leaked an
internal exception and ``nominate`` returned False and retried forever."""

from __future__ import annotations

import uuid

import pytest

import kubecoord
from kubecoord import NamespaceNotFoundError

from .clusters import Cluster


def test_the_first_write_into_a_missing_namespace_is_a_typed_error(cluster: Cluster) -> None:
    namespace = f"missing-{uuid.uuid4().hex[:8]}"
    since = cluster.mark()
    with kubecoord.connect(f"kubernetes://{namespace}", kubeconfig=str(cluster.admin_kubeconfig),
                           lease_duration=4, renew_deadline=3, retry_period=1) as coordinator:
        with pytest.raises(NamespaceNotFoundError, match=namespace):
            coordinator.storage("store").put("k", "v")
        with pytest.raises(NamespaceNotFoundError, match=namespace):
            coordinator.group_membership("group").join("m")
        election = coordinator.leader_election("service")
        with pytest.raises(NamespaceNotFoundError, match=namespace):
            election.nominate("a")
        assert election.get_leader() is None
    attempts = [w for w in cluster.writes(cluster.admin_user, since) if w[0] == "create"]
    assert len(attempts) <= 3, attempts  # one create each, no retry storm
