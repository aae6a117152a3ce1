"""nominate() on kubernetes:// when its first write fails: the error is kubecoord's, and a
nominate() that raised leaves nothing registered (so nominating again is not refused).

On the API emulator, whose controls make the failures happen on demand: ``fail(cut=True)``
applies a request and breaks its answer half-way through the body (a network that broke at
the worst moment), ``hang()`` holds requests unanswered.
"""

from __future__ import annotations

import os
import pathlib
import signal
import uuid

from kubecoord import CoordinationError
from kubecoord_testkit.emulator import ApiEmulator
from tests.helpers import eventually

from .conftest import Connect
from .processes import Child


def test_a_create_whose_answer_broke_is_an_unknown_outcome_not_a_library_exception(
    connect: Connect, api_emulator: ApiEmulator
) -> None:
    # The Lease is created, its answer lost: the candidate cannot know it holds. Before, the
    # client library's own exception (urllib3's ProtocolError) came out of nominate() and
    # the candidate stayed registered: nominating again raised MemberExistsError.
    service = f"cut-{uuid.uuid4().hex[:8]}"
    election = connect().leader_election(service)
    election.get_leader()  # the watch is up: nominate's first request is its create
    api_emulator.fail("create", "leases", cut=True)
    try:
        election.nominate("a")  # False, or an error of kubecoord's
    except CoordinationError:
        election.nominate("a")
    assert api_emulator.pending_faults() == 0, "the create was not made"
    eventually(lambda: election.is_leader("a"), 30)  # the Lease names "a" and it leads once it knows

def test_a_nominate_interrupted_by_a_signal_leaves_nothing_registered(
    kubeconfig_path: pathlib.Path, api_emulator: ApiEmulator
) -> None:
    # A signal handler that raises (a shutdown handler's SystemExit) while nominate() waits
    # for its create: nominate() raises that, and the candidate is not left behind on the
    # handle — nominating again works (it used to raise MemberExistsError).
    service = f"interrupted-{uuid.uuid4().hex[:8]}"
    environment = {**os.environ, "KUBECOORD_URL": "kubernetes://default", "KUBECOORD_TIMINGS": "3,2.5,0.5"}
    child = Child("interrupted", ["interrupted", str(kubeconfig_path), service, "a"], environment)
    try:
        child.wait_for(lambda line: line["event"] == "ready")
        api_emulator.hang()
        try:
            child.send_line()  # nominate
            eventually(lambda: api_emulator.held() >= 1, 30)  # the create is held
            child.signal(signal.SIGUSR1)
            child.wait_for(lambda line: line["event"] in ("interrupted", "nominated"))
        finally:
            api_emulator.hang(False)  # the held create is dropped, never processed
        assert [line["event"] for line in child.lines][-1] == "interrupted", child.lines
        child.send_line()
        index = child.wait_for(lambda line: line["event"] in ("nominated", "failed"))
        assert child.lines[index]["event"] == "nominated", child.lines[index]
        child.wait_for(lambda line: line["event"] == "leads", start=index, timeout=90)
        assert child.lines[-1]["value"] is True, child.lines
    finally:
        child.kill()
