"""The storm's judge (kubecoord_testkit.storm.judging) on hand-written audit events: which
operator writes are in term, refused after their term, applied in the window before the
successor's first write, or violations."""

from __future__ import annotations

import json
from typing import Any

from kubecoord_testkit.storm.judging import judge, read_audit

NS, LEASE, ACCOUNT = "sys", "kubecoord-operator", "system:serviceaccount:sys:op"


def _stamp(second: float) -> str:
    whole = int(second)
    return f"2026-12-01T10:00:{whole:02d}.{round((second - whole) * 1e6):06d}Z"


def _lease(received: float, answered: float, holder: str, transitions: int) -> str:
    return json.dumps({"stage": "ResponseComplete", "verb": "update", "user": {"username": ACCOUNT},
                       "objectRef": {"resource": "leases", "namespace": NS, "name": LEASE},
                       "responseStatus": {"code": 200},
                       "responseObject": {"spec": {"holderIdentity": holder, "leaseTransitions": transitions}},
                       "requestReceivedTimestamp": _stamp(received), "stageTimestamp": _stamp(answered)})


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


HANDOVER = [_lease(1.0, 1.1, "a-1", 1), _lease(5.0, 5.1, "a-1", 1), _lease(10.0, 10.1, "b-1", 2)]
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
