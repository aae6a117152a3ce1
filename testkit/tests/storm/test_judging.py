"""The storm's judge (kubecoord_testkit.storm.judging) on hand-written audit events: which
operator writes are in term, refused after their term, applied in the window before the
successor's first write, or violations."""

from __future__ import annotations

import json
from typing import Any

from kubecoord_testkit.storm.judging import Write, judge, moment, read_audit

NS, LEASE, ACCOUNT = "sys", "kubecoord-operator", "system:serviceaccount:sys:op"


def _stamp(second: float) -> str:
    whole = int(second)
    return f"2026-12-01T10:00:{whole:02d}.{round((second - whole) * 1e6):06d}Z"


def _at(writes: list[Write]) -> list[float]:
    """When ``writes`` were received, in seconds from the stamps' 10:00:00."""
    return [round(w.received - moment(_stamp(0.0)), 3) for w in writes]


def _lease(received: float, answered: float, holder: str, transitions: int, *, verb: str = "update",
           recorded: bool = True) -> str:
    """A 2xx write of the operator Lease; ``recorded=False``: logged at level Metadata, without
    the Lease as stored (what a rule by resourceNames does to a create: its URL has no name)."""
    event: dict[str, Any] = {
        "stage": "ResponseComplete", "verb": verb, "user": {"username": ACCOUNT},
        "level": "RequestResponse" if recorded else "Metadata",
        "objectRef": {"resource": "leases", "namespace": NS, "name": LEASE},
        "responseStatus": {"code": 201 if verb == "create" else 200},
        "requestReceivedTimestamp": _stamp(received), "stageTimestamp": _stamp(answered)}
    if recorded:
        event["responseObject"] = {"spec": {"holderIdentity": holder, "leaseTransitions": transitions}}
    return json.dumps(event)


def _write(received: float, identity: str, code: int, term: str | None, **extra: Any) -> str:
    event: dict[str, Any] = {
        "stage": "ResponseComplete", "verb": "patch", "user": {"username": ACCOUNT},
        "userAgent": f"kubecoord-operator/{identity}", "requestURI": "/api/v1/namespaces/app/configmaps/x",
        "objectRef": {"resource": "configmaps", "namespace": "app", "name": "x"},
        "responseStatus": {"code": code},
        "requestReceivedTimestamp": _stamp(received), "stageTimestamp": _stamp(received + 0.01), **extra}
    if term is not None:
        event["impersonatedUser"] = {"username": ACCOUNT, "extra": {"kubecoord.dev/term": [term]}}
    return json.dumps(event)


def _judge(lines: list[str], *, fenced: bool = True) -> Any:
    return judge(read_audit(lines, lease_namespace=NS, lease=LEASE, account=ACCOUNT), fenced=fenced)


HANDOVER = [_lease(1.0, 1.1, "a-1", 1, verb="create"), _lease(5.0, 5.1, "a-1", 1), _lease(10.0, 10.1, "b-1", 2)]
"""a-1 holds from 1.1 s, b-1 takes over at 10.1 s."""


def test_writes_of_the_holder_are_in_term_and_a_refused_late_write_is_fencing_at_work() -> None:
    verdict = _judge([*HANDOVER, _write(2.0, "a-1", 200, "a-1/1"), _write(11.0, "b-1", 201, "b-1/2"),
                      _write(12.0, "a-1", 403, "a-1/1")])
    assert verdict.ok and verdict.checked == 3 and verdict.in_term == 2 and verdict.takeovers == 2
    assert [w.received for w in verdict.refused_late] and not verdict.violations


def test_a_deposed_write_applied_after_the_successors_first_is_a_violation() -> None:
    verdict = _judge([*HANDOVER, _write(11.0, "b-1", 201, None), _write(12.5, "a-1", 200, None)], fenced=False)
    assert not verdict.ok
    assert [(w.identity, w.code) for w in verdict.violations] == [("a-1", 200)]


def test_one_applied_before_the_successors_first_write_is_the_window_not_a_violation() -> None:
    verdict = _judge([*HANDOVER, _write(10.5, "a-1", 200, "a-1/1"), _write(11.0, "b-1", 201, "b-1/2")])
    assert verdict.ok and len(verdict.window) == 1


def test_a_write_during_the_lease_write_that_makes_its_sender_holder_is_in_term() -> None:
    verdict = _judge([*HANDOVER, _write(10.05, "b-1", 201, "b-1/2")])
    assert verdict.ok and verdict.in_term == 1


def test_a_replica_that_never_held_the_lease_writing_is_a_violation() -> None:
    assert len(_judge([*HANDOVER, _write(3.0, "b-9", 200, "b-9/7")]).violations) == 1


def test_fenced_an_in_term_write_naming_another_term_or_none_is_a_mismatch() -> None:
    verdict = _judge([*HANDOVER, _write(2.0, "a-1", 200, "a-1/0"), _write(3.0, "a-1", 200, None)])
    assert len(verdict.term_mismatches) == 2 and not verdict.ok


def test_dry_runs_and_backend_handle_writes_are_not_judged() -> None:
    backend = json.loads(_write(12.0, "a-1", 200, None))
    backend["userAgent"] = "OpenAPI-Generator/31.0.0/python"
    verdict = _judge([*HANDOVER, json.dumps(backend),
                      _write(12.0, "a-1", 201, "a-1/1", requestURI="/api/v1/namespaces/sys/configmaps?dryRun=All")])
    assert verdict.checked == 0 and verdict.unattributed == 1


def test_a_deposed_write_applied_1_ms_after_the_successors_first_is_a_violation() -> None:
    verdict = _judge([*HANDOVER, _write(11.0, "b-1", 201, "b-1/2"), _write(11.001, "a-1", 200, "a-1/1")])
    assert [w.identity for w in verdict.violations] == ["a-1"] and _at(verdict.violations) == [11.001]
    assert not verdict.ok


def test_a_replica_that_never_held_writing_during_a_takeover_or_before_the_lease_existed_is_a_violation() -> None:
    verdict = _judge([*HANDOVER, _write(0.5, "c-1", 200, "c-1/0"), _write(10.05, "c-1", 200, "c-1/2")])
    assert _at(verdict.violations) == [0.5, 10.05] and not verdict.unattributable


# The first holder's first term as a storm's audit log had it: the Lease's create at 0.000-0.004 s
# made a-1 the holder (a-1/1); a-1's first writes were received 0.36-0.50 s, its first renewal
# 0.517 s, answered 0.520 s.
FIRST_WRITES = [_write(0.357, "a-1", 201, "a-1/1"), _write(0.363, "a-1", 201, "a-1/1"),
                _write(0.392, "a-1", 201, "a-1/1"), _write(0.496, "a-1", 200, "a-1/1")]


def test_the_first_holders_writes_are_in_the_term_its_lease_create_began() -> None:
    verdict = _judge([_lease(0.0, 0.004, "a-1", 1, verb="create"), *FIRST_WRITES, _lease(0.517, 0.520, "a-1", 1)])
    assert verdict.ok and verdict.in_term == 4 and verdict.takeovers == 1


def test_writes_before_the_first_recorded_lease_state_are_unattributable_not_passed() -> None:
    """The Lease's create logged without the Lease: who held it at the first writes is not in
    the log, so they are reported as unattributable and the verdict fails (not a pass, nor a
    replica that never held)."""
    verdict = _judge([_lease(0.0, 0.004, "a-1", 1, verb="create", recorded=False), *FIRST_WRITES,
                      _lease(0.517, 0.520, "a-1", 1)])
    assert _at(verdict.unattributable) == [0.357, 0.363, 0.392, 0.496]
    assert not verdict.violations and verdict.unrecorded_lease_writes == 1 and not verdict.ok


def test_a_log_that_starts_after_the_lease_existed_leaves_the_writes_before_its_first_state_unattributable() -> None:
    verdict = _judge([*FIRST_WRITES, _lease(0.517, 0.520, "a-1", 1), _write(0.6, "a-1", 200, "a-1/1")])
    assert len(verdict.unattributable) == 4 and verdict.in_term == 1 and not verdict.ok


def test_a_lease_write_missing_from_the_log_fails_the_verdict_whatever_the_writes() -> None:
    verdict = _judge([*HANDOVER, _lease(12.0, 12.1, "a-1", 3, recorded=False), _write(13.0, "a-1", 200, "a-1/3")])
    assert verdict.unrecorded_lease_writes == 1 and not verdict.ok


def test_a_successor_that_held_an_earlier_term_is_judged_by_its_first_write_of_the_new_one() -> None:
    """Same identity again (a container restarted in its pod): b-1's write after a-1 took the
    Lease back but before a-1's first write of a-1/3 is the window; after it, a violation."""
    verdict = _judge([*HANDOVER, _write(2.0, "a-1", 200, "a-1/1"), _write(11.0, "b-1", 201, "b-1/2"),
                      _lease(20.0, 20.1, "a-1", 3), _write(20.5, "b-1", 200, "b-1/2"),
                      _write(21.0, "a-1", 200, "a-1/3"), _write(21.5, "b-1", 200, "b-1/2")])
    assert _at(verdict.window) == [20.5]
    assert _at(verdict.violations) == [21.5]


def test_without_any_lease_state_every_write_is_unattributable() -> None:
    verdict = _judge([_write(1.0, "a-1", 200, "a-1/1")])
    assert len(verdict.unattributable) == 1 and not verdict.ok
