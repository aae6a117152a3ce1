"""The churn checks catch what they claim to (synthetic reports)."""

from __future__ import annotations

from .checks import holders, stray_work, violations


def _line(e: str, member: str, t: float, units: list[str], gen: int = 1) -> dict[str, object]:
    return {"e": e, "member": member, "t": t, "units": units, "gen": gen}


def test_a_clean_handover_passes() -> None:
    reports = [
        _line("assigned", "a", 1.0, ["u"]), _line("work", "a", 1.5, ["u"]), _line("revoked", "a", 2.0, ["u"]),
        _line("assigned", "b", 2.1, ["u"], gen=2), _line("work", "b", 2.2, ["u"], gen=2),
    ]
    assert violations(reports, {}) == []
    assert holders(reports, {}) == {"u": "b"}


def test_overlap_is_caught() -> None:
    reports = [_line("assigned", "a", 1.0, ["u"]), _line("assigned", "b", 1.5, ["u"], gen=2)]
    assert violations(reports, {}) == ["u: held by a until inf and by b from 1.500"]


def test_a_killed_member_holds_until_it_was_killed() -> None:
    reports = [_line("assigned", "a", 1.0, ["u"]), _line("assigned", "b", 3.0, ["u"], gen=2)]
    assert violations(reports, {"a": 2.0}) == []
    assert violations(reports, {"a": 3.5}) != []
    assert holders(reports, {"a": 2.0}) == {"u": "b"}


def test_generations_and_stray_work_are_caught() -> None:
    reports = [
        _line("assigned", "a", 1.0, ["u"], gen=3), _line("revoked", "a", 2.0, ["u"]),
        _line("assigned", "a", 3.0, ["u"], gen=3), _line("work", "a", 4.0, ["v"], gen=3),
        _line("work", "a", 5.0, ["u"], gen=2),
    ]
    found = violations(reports, {})
    assert "a: generation 3 assigned after 3" in found
    assert any("work on v it does not hold" in f for f in found)
    assert "a: work on generation 2 after 3" in found


def test_stray_work_of_a_paused_member_is_caught() -> None:
    reports = [
        _line("assigned", "a", 1.0, ["u"]), _line("assigned", "b", 5.0, ["u"], gen=2),
        _line("work", "a", 4.0, ["u"]), _line("work", "a", 6.0, ["u"]),
    ]
    assert stray_work(reports, "a", {}) == ["a worked on u at 6.000 while b held it"]
