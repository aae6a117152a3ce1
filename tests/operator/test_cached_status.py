"""Status from the informer caches (kubecoord.operator.kinds): on the kubernetes backend the
operator holds no election, membership or storage handle per resource, and the status it
computes from the namespace's shared watches is the live state, on the emulator.

The operator runs in this process (conftest.py), so its handles are counted among the
process's objects: before this design it held one election handle per LeaderElection, a
membership handle and a store handle per Group and a storage handle and listener
registry per KVStore, each with its listener (about 24 MiB at 10,000 resources)."""

from __future__ import annotations

import gc
import pathlib

import kubecoord
from kubecoord.api import Coordinator, GroupMembership, LeaderElection, ListenerRegistry, Storage
from kubecoord.testing import crash
from kubecoord.wire import object_names
from kubecoord.wire.group_record import derived_name
from tests.helpers import eventually
from tests.operator.conftest import FAST, NAMESPACE, Resources


def _handles_named(prefix: str) -> list[object]:
    """Every live kubecoord handle in this process on an election, group or store whose
    name starts with ``prefix`` (the operator's included: it runs in this process)."""
    gc.collect()
    found = []
    for obj in gc.get_objects():
        # type(), not isinstance(): isinstance() asks a weakref proxy's referent, and one
        # whose referent is gone raises ReferenceError (seen in a fresh-clone run).
        if issubclass(type(obj), LeaderElection | GroupMembership | Storage | ListenerRegistry):
            name = getattr(obj, "service", None) or getattr(obj, "group", None) or getattr(obj, "name", None)
            if isinstance(name, str) and name.startswith(prefix):
                found.append(obj)
    return found


def test_no_handle_per_resource_and_status_is_the_live_state(
    resources: Resources, client: Coordinator, unique: str
) -> None:
    prefix = f"cached-{unique}"
    elections = [f"{prefix}-e{i}" for i in range(6)]
    groups = [f"{prefix}-g{i}" for i in range(3)]
    stores = [f"{prefix}-s{i}" for i in range(3)]
    for name in elections:
        resources.create("leaderelections", "LeaderElection", name,
                         {"leaseDurationSeconds": 3, "renewDeadlineSeconds": 2, "retryPeriodSeconds": 0.5})
    for name in groups:
        resources.create("groups", "Group", name, {"leaseDurationSeconds": 3, "renewIntervalSeconds": 0.5})
    for name in stores:
        resources.create("kvstores", "KVStore", name, {})
    for plural, names in (("leaderelections", elections), ("groups", groups), ("kvstores", stores)):
        for name in names:
            resources.wait_ready(plural, name)

    # Twelve resources mirrored, not one handle held for them.
    assert _handles_named(prefix) == []

    # The status follows the live state all the same: a leader, members, keys.
    election = client.leader_election(elections[0])
    assert election.nominate("c1", data="d1")
    eventually(lambda: resources.status("leaderelections", elections[0]).get("leader") == "c1", timeout=20)
    assert resources.status("leaderelections", elections[0])["leaderData"] == "d1"
    group = client.group_membership(groups[0])
    group.join("w1", data="a")
    group.join("w2", data="b")
    eventually(lambda: resources.status("groups", groups[0]).get("memberCount") == 2, timeout=20)
    assert [m["id"] for m in resources.status("groups", groups[0])["members"]] == ["w1", "w2"]
    storage = client.storage(stores[0])
    storage.put("a/b", "xyz")
    storage.put("c", "12")
    eventually(lambda: resources.status("kvstores", stores[0]).get("keys") == 2, timeout=20)
    assert resources.status("kvstores", stores[0])["bytes"] == len("a/b") + 3 + 1 + 2
    election.resign("c1")
    eventually(lambda: resources.status("leaderelections", elections[0]).get("leader") is None, timeout=20)
    group.leave("w2")
    eventually(lambda: resources.status("groups", groups[0]).get("memberCount") == 1, timeout=20)
    election.close()
    group.close()
    storage.close()


def test_a_crashed_member_is_reaped_by_the_operator_alone(
    resources: Resources, kubeconfig_path: pathlib.Path, unique: str
) -> None:
    """No client is left to notice the expiry: the operator, which holds no membership
    handle, judges the member Lease from its cache, deletes it and drops the member."""
    name = f"reap-{unique}"
    resources.create("groups", "Group", name, {"leaseDurationSeconds": 3, "renewIntervalSeconds": 0.5})
    resources.wait_ready("groups", name)
    member = kubecoord.connect(f"kubernetes://{NAMESPACE}", kubeconfig=str(kubeconfig_path), **FAST)
    member.group_membership(name).join("doomed", data="x")
    eventually(lambda: resources.status("groups", name).get("memberCount") == 1, timeout=20)
    lease = object_names.member_lease_name(name, "doomed")
    assert lease in resources.lease_names()
    crash(member)  # no leave, no further renewal, nobody else watching the group
    eventually(lambda: resources.status("groups", name).get("memberCount") == 0, timeout=30, interval=0.2)
    eventually(lambda: lease not in resources.lease_names(), timeout=10, interval=0.2)
    assert "MemberExpired" in [reason for reason, _ in resources.events(name)]


def test_assignment_groups_keep_their_handles(resources: Resources, unique: str) -> None:
    """The operator leads a Group with spec.assignment (membership handle, timers): that one
    kind of resource still holds handles; the others of the same run hold none."""
    name = f"assigned-{unique}"
    resources.create("groups", "Group", name, {"leaseDurationSeconds": 3, "renewIntervalSeconds": 0.5,
                                               "assignment": {"units": 4}})
    resources.wait_ready("groups", name)
    held = _handles_named(name)
    assert held, "the assignment leader's handles"
    assert {getattr(h, "name", None) for h in held if isinstance(h, Storage)} == {derived_name(name)}
