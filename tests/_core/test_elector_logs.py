"""Every way a leader's renewal fails or it steps down says why in one structured log line
(kubecoord.lease.elector), with its figures: the memory backend's record table, a manual
clock, caplog. Before, a renew conflict logged nothing at all (the interop test's k1 went
1.9 s without renewing and its logs could not say whether a conflict was why)."""

from __future__ import annotations

import logging
from typing import TypedDict, Unpack

import pytest

from kubecoord._core.lease import Elector, LeaderRecord, Timings
from kubecoord.backends.memory.records import TableView
from kubecoord.history import EventLog
from kubecoord.testing import ManualClock

from ..helpers import UnreachableTable
from ..helpers import elector as memory_elector

TIMINGS = Timings(lease_duration=15, renew_deadline=10, retry_period=2)
NAME = "svc"


class Table(UnreachableTable):
    """A record table that can fail like an unreachable server, and answer a write slowly."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self.clock = clock
        self.slow = 0.0

    def answering(self, record: LeaderRecord) -> None:
        self.clock.advance(self.slow)  # the answer takes this long to come back


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def table(clock: ManualClock) -> Table:
    return Table(clock)


def _leader(
    table: Table, clock: ManualClock, name: str = "a", events: EventLog | None = None
) -> tuple[Elector, TableView]:
    view = TableView(table, NAME, clock)
    elector = memory_elector(name, view, clock, TIMINGS, events=events)
    elector.step()
    assert elector.is_leader()
    return elector, view


class _Changes(TypedDict, total=False):
    """The LeaderRecord fields an edit may change."""

    holder: str
    transitions: int
    data: str


def _edit(table: Table, **changes: Unpack[_Changes]) -> None:
    """Somebody else's write over the current version."""
    current = table.read(NAME)
    assert current is not None
    table.write(NAME, current[0]._replace(**changes), current[1])


class Recorder(EventLog):
    """The history events an elector records, in order."""

    def __init__(self) -> None:
        self.events: list[dict[str, object]] = []

    def record(self, **fields: object) -> None:
        self.events.append(fields)


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "kubecoord.lease.elector"]


def _only(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    (line,) = _lines(caplog)
    caplog.clear()
    return line


def _figures(line: logging.LogRecord) -> dict[str, object]:
    return {key: getattr(line, key) for key in ("since_renewal", "left", "renew_deadline", "retry_period")}


@pytest.fixture(autouse=True)
def _info(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kubecoord.lease.elector")


def test_a_failed_renewal_logs_why_and_the_time_left_then_the_deadline(
    table: Table, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    elector, _ = _leader(table, clock)
    table.down = True
    clock.advance(TIMINGS.retry_period)
    elector.step()
    line = _only(caplog)
    assert line.levelno == logging.INFO and line.getMessage().startswith("renew failed")
    assert line.reason == "error" and line.error_type == "BackendUnavailableError"  # type: ignore[attr-defined]
    assert _figures(line) == {"since_renewal": 2.0, "left": 8.0, "renew_deadline": 10.0, "retry_period": 2.0}
    clock.advance(7)  # 1 s left, less than a retry period: a warning now
    elector.step()
    line = _only(caplog)
    assert line.levelno == logging.WARNING and line.left == 1.0  # type: ignore[attr-defined]
    clock.advance(1.5)
    elector.step()
    line = _only(caplog)
    assert line.levelno == logging.WARNING and line.getMessage() == "lost leadership: renew deadline passed"
    assert line.reason == "deadline" and line.late_by == 0.5 and line.epoch == 1  # type: ignore[attr-defined]
    assert line.since_renewal == 10.5  # type: ignore[attr-defined]


def test_a_renew_conflict_that_is_still_ours_says_so_and_renews(
    table: Table, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    elector, _ = _leader(table, clock)
    _edit(table, data="edited")  # still a's
    clock.advance(TIMINGS.retry_period)
    assert elector.step() == 0.0
    line = _only(caplog)
    assert line.levelno == logging.INFO and line.reason == "conflict"  # type: ignore[attr-defined]
    assert "still names us" in line.getMessage() and line.version == "2"  # type: ignore[attr-defined]
    assert _figures(line)["since_renewal"] == 2.0
    elector.step()
    assert elector.is_leader() and not _lines(caplog)


def test_a_renew_conflict_whose_reread_fails_says_so(
    table: Table, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    elector, _ = _leader(table, clock)
    _edit(table, data="edited")
    table.reads_down = True
    clock.advance(TIMINGS.retry_period)
    elector.step()
    line = _only(caplog)
    assert line.reason == "conflict" and "re-read failed" in line.getMessage()  # type: ignore[attr-defined]
    assert line.error == "server down" and line.left == 8.0  # type: ignore[attr-defined]


def test_a_renew_conflict_lost_to_another_holder_is_a_warning_naming_it(
    table: Table, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    elector, _ = _leader(table, clock)
    _edit(table, holder="b")  # not delivered to a's view
    clock.advance(TIMINGS.retry_period)
    elector.step()
    line = _only(caplog)
    assert line.levelno == logging.WARNING and line.reason == "conflict"  # type: ignore[attr-defined]
    assert line.holder == "b" and line.getMessage().startswith("lost leadership")  # type: ignore[attr-defined]
    assert not elector.is_leader()


def test_a_record_the_watch_shows_taken_is_a_warning_naming_the_holder(
    table: Table, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    elector, view = _leader(table, clock)
    _edit(table, holder="b", transitions=5)
    view.deliver()
    clock.advance(0.5)
    elector.step()
    line = _only(caplog)
    assert line.reason == "taken" and line.holder == "b" and line.epoch_seen == 5  # type: ignore[attr-defined]
    assert line.since_renewal == 0.5  # type: ignore[attr-defined]


def test_a_renewal_answered_after_the_deadline_says_how_long_it_took(
    table: Table, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    elector, _ = _leader(table, clock)
    clock.advance(TIMINGS.retry_period)
    table.slow = 9.0
    elector.step()
    line = _only(caplog)
    assert line.reason == "answered_late" and line.took == 9.0 and line.left == 8.0  # type: ignore[attr-defined]


def test_a_failed_release_is_a_warning(table: Table, clock: ManualClock, caplog: pytest.LogCaptureFixture) -> None:
    elector, _ = _leader(table, clock)
    table.down = True
    assert not elector.release()
    line = _only(caplog)
    assert line.levelno == logging.WARNING and line.getMessage().startswith("release failed")


def test_a_release_after_an_unnoticed_deadline_logs_the_loss_then_releases(
    table: Table, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A leader whose renew deadline lapsed with no step since (a stalled process, a
    scheduler that ran late) and that is then withdrawn says it lost leadership, with the
    same line and history event a step would have given. Before: neither ``lost`` nor
    ``resigned`` was logged, so the term had no end event."""
    history = Recorder()
    elector, _ = _leader(table, clock, events=history)
    clock.advance(TIMINGS.renew_deadline + 1)
    assert elector.release()  # the record still names us: it is freed
    line = _only(caplog)
    assert line.getMessage() == "lost leadership: renew deadline passed"
    assert line.reason == "deadline" and line.late_by == 1.0 and line.epoch == 1  # type: ignore[attr-defined]
    assert [e["event"] for e in history.events] == ["acquired", "lost"]
    current = table.read(NAME)
    assert current is not None and current[0].holder == ""


class _Applied(Table):
    """Notes the wall time each record write was applied at (before its answer travels)."""

    def __init__(self, clock: ManualClock, wall: float) -> None:
        super().__init__(clock)
        self.wall = wall
        self.applied: list[float] = []

    def answering(self, record: LeaderRecord) -> None:
        self.applied.append(self.wall + self.clock.now())
        super().answering(record)


def test_acquired_carries_when_its_write_was_sent_before_the_write_took_effect(clock: ManualClock) -> None:
    """Another process may see the record change (and log ``observed``) as soon as the write
    is applied, before ``acquired`` is stamped (the record's and the mark's answers travel
    first): ``sent`` is a moment before the acquisition took effect, which the pipeline's
    clock bounds start from. Without ``sent``, the answer's 0.3 s in transit read as a
    0.3 s clock offset between the two processes."""
    table = _Applied(clock, wall=1_000.0)
    table.slow = 0.3
    history = Recorder()
    view = TableView(table, NAME, clock)
    elector = memory_elector("a", view, clock, TIMINGS, events=history, wall=lambda: table.wall + clock.now())
    elector.step()
    assert elector.is_leader()
    (acquired,) = [e for e in history.events if e["event"] == "acquired"]
    record_applied = table.applied[0]
    assert isinstance(acquired["sent"], float) and isinstance(acquired["ts"], float)
    assert acquired["sent"] <= record_applied
    assert acquired["ts"] >= record_applied + 0.3  # stamped once the answer came back
