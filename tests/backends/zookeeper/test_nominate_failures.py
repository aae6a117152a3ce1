"""nominate() on zookeeper:// when its create is applied but never answered: nothing is left
behind. The node was made under a name the candidate never learnt; left in place it would
lead (or queue) for as long as the session lives, and nobody would ever resign it.

A real server; the candidate reaches it through the fault proxy, which holds the server's
answers, then breaks the connection and refuses new ones for longer than the request
timeout (so the candidate cannot look its node up), then lets it reconnect to the same
session.
"""

from __future__ import annotations

import uuid

import pytest
from kazoo.client import KazooClient

import kubecoord
from kubecoord import BackendUnavailableError
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer
from tests.helpers import eventually

from .helpers import applied_unanswered, proxied_and_direct


def test_a_create_applied_but_never_answered_leaves_no_node_behind(
    zookeeper_server: ZooKeeperServer, zk: KazooClient
) -> None:
    chroot = f"nominate-{uuid.uuid4().hex[:8]}"
    elections = f"/{chroot}/elections/svc"
    with proxied_and_direct(zookeeper_server, chroot) as (proxy, cut_off, other):
        election = cut_off.leader_election("svc")
        outcome = applied_unanswered(proxy, zk, elections, lambda: election.nominate("a"))
        assert len(outcome) == 1 and isinstance(outcome[0], BackendUnavailableError), outcome
        # healed: reconnects to the same session, which still holds the node
        rival = other.leader_election("svc")
        rival.nominate("b")
        eventually(lambda: rival.is_leader("b"), 30)  # "a"'s node went; before, it led for good
        assert len(zk.get_children(elections)) == 1
        assert election.nominate("a") is False  # nothing was left registered on the handle either
        assert len(zk.get_children(elections)) == 2


pytestmark = pytest.mark.timeout(180)


def test_a_candidate_that_re_enters_adopts_its_own_unanswered_node(
    zookeeper_server: ZooKeeperServer, zk: KazooClient
) -> None:
    # A leader whose node is deleted behind its back re-enters with a new node. If an
    # earlier create of its (same unique prefix, same session) was applied but never
    # answered, that node is there too: re-entering must take it, not make a second one
    # behind it — the first would lead for the rest of the session with nobody behind it.
    chroot = f"adopt-{uuid.uuid4().hex[:8]}"
    elections = f"/{chroot}/elections/svc"
    with kubecoord.connect(f"zookeeper://{zookeeper_server.hosts}/{chroot}", lease_duration=10.0) as coord, \
            kubecoord.connect(f"zookeeper://{zookeeper_server.hosts}/{chroot}", lease_duration=10.0) as other:
        election = coord.leader_election("svc")
        assert election.nominate("a")
        (node,) = zk.get_children(elections)
        prefix = node[: node.index("__lock__") + len("__lock__")]
        # The create whose answer was lost: made by the candidate's own session (kazoo's client).
        coord.session.client.create(f"{elections}/{prefix}", b"a\n", ephemeral=True, sequence=True)  # type: ignore[attr-defined]
        zk.delete(f"{elections}/{node}")  # behind its back: it re-enters
        eventually(lambda: len(zk.get_children(elections)) == 1 and election.is_leader("a"), 30)
        rival = other.leader_election("svc")
        rival.nominate("b")
        election.resign("a")
        eventually(lambda: rival.is_leader("b"), 30)  # nothing of "a" is left ahead of it
