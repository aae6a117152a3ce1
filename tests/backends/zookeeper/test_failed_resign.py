"""resign() on zookeeper:// when the delete of the leader's node gets no answer: the
candidacy is withdrawn all the same, and the node is deleted on the session's next
CONNECTED if it is still there (as close() does).

Before, the resign raised BackendUnavailableError and kept the candidate on the handle,
no longer leading: a delete that had landed made it re-enter behind the successor (a
second resign() was then ignored, as for any candidate that does not lead, and it led
again once the successor left); a delete that had not landed left its node the lowest,
and the candidate led again, under the same epoch, once the session reconnected.

A real server; the resigning leader reaches it through the fault proxy, which holds the
server's answers (the delete lands, its answer never comes) or drops what the client
sends (the delete never arrives), then resets the connection; the client reconnects to
the same session.
"""

from __future__ import annotations

import contextlib
import uuid

import pytest
from kazoo.client import KazooClient

from kubecoord import BackendUnavailableError
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer
from tests.helpers import eventually

from .helpers import proxied_and_direct


@pytest.mark.parametrize("fault", ["answer held", "request dropped"])
def test_a_resign_whose_delete_got_no_answer_withdraws_the_candidacy(
    zookeeper_server: ZooKeeperServer, zk: KazooClient, fault: str
) -> None:
    chroot = f"resign-{uuid.uuid4().hex[:8]}"
    elections = f"/{chroot}/elections/svc"
    with proxied_and_direct(zookeeper_server, chroot) as (proxy, resigning, other):
        election, rival = resigning.leader_election("svc"), other.leader_election("svc")
        assert election.nominate("a")
        first = election.get_leader()
        assert first is not None and first.id == "a"
        assert not rival.nominate("b")
        if fault == "answer held":
            proxy.hold("down")
        else:
            proxy.drop("up")
        with contextlib.suppress(BackendUnavailableError):  # before, it raised (and kept the candidacy)
            election.resign("a")  # no answer within the request timeout
        assert not election.is_leader("a")
        if fault == "answer held":
            eventually(lambda: rival.is_leader("b"), 30)  # the delete landed
        proxy.heal()
        proxy.cut()  # the client reconnects: the same session
        eventually(lambda: rival.is_leader("b"), 30)
        eventually(lambda: len(zk.get_children(elections)) == 1, 30)  # only b's node; a's never came back
        leader = rival.get_leader()
        assert leader is not None and leader.id == "b" and leader.epoch > first.epoch
        rival.resign("b")
        eventually(lambda: zk.get_children(elections) == [], 30)
        assert not election.is_leader("a")  # withdrawn: it never leads again unless nominated
        nominated: list[bool] = []

        def nominate() -> bool:  # once the client has reconnected (a nominate that raised leaves nothing)
            with contextlib.suppress(BackendUnavailableError):
                nominated.append(election.nominate("a"))  # before: MemberExistsError, the candidacy was kept
            return bool(nominated)

        eventually(nominate, 30)
        assert nominated == [True]
        again = election.get_leader()
        assert again is not None and again.id == "a" and again.epoch > leader.epoch
