"""The event log: schema of the lines, targets, and that I/O trouble never reaches the caller."""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

import kubecoord
from kubecoord.history import ENV_VAR, EventLog, JsonlEventLog, open_event_log, rfc3339
from kubecoord.testing import ManualClock, crash
from kubecoord.wire.events import SCHEMA_VERSION
from tests.helpers import eventually


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def parse_ts(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC).timestamp()


def test_rfc3339_is_utc_with_microseconds() -> None:
    assert rfc3339(0.5) == "1970-01-01T00:00:00.500000Z"
    assert rfc3339(1_795_000_000.123456) == "2026-11-18T11:06:40.123456Z"


def test_lines_carry_the_schema_fields_and_leave_out_none(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    events = JsonlEventLog(path, backend="memory", namespace="ns", process="p1")
    events.record(primitive="leader_election", name="svc", event="acquired", ts=10.0, member="a", epoch=3,
                  valid_until=25.0, key=None)
    events.record(primitive="kv", name="store", event="updated", key="k/1", version=2)
    events.close()
    first, second = read_lines(path)
    assert first == {
        "v": SCHEMA_VERSION, "ts": "1970-01-01T00:00:10.000000Z", "seq": 1, "source": "client", "process": "p1",
        "backend": "memory", "namespace": "ns", "primitive": "leader_election", "name": "svc",
        "event": "acquired", "member": "a", "epoch": 3, "valid_until": "1970-01-01T00:00:25.000000Z",
    }
    assert second["seq"] == 2 and second["key"] == "k/1" and second["version"] == 2
    assert parse_ts(second["ts"]) > 1_700_000_000  # stamped with the wall clock by default
    assert events.dropped == 0


def test_a_path_is_appended_to_and_a_file_object_is_left_open(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"existing":1}\n', encoding="utf-8")
    events = JsonlEventLog(str(path), backend="memory", namespace="ns")
    events.record(primitive="group", name="g", event="joined", member="m")
    events.close()
    assert [line.get("event") for line in read_lines(path)] == [None, "joined"]

    buffer = io.StringIO()
    events = JsonlEventLog(buffer, backend="memory", namespace="ns")
    events.record(primitive="group", name="g", event="left", member="m")
    events.close()
    assert not buffer.closed
    assert json.loads(buffer.getvalue())["event"] == "left"


def test_full_disk_is_counted_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    events = JsonlEventLog("/dev/full", backend="memory", namespace="ns")
    with caplog.at_level(logging.WARNING, logger="kubecoord.history"):
        for i in range(50):
            events.record(primitive="kv", name="s", event="put", key=f"k{i}", version=1)
        events.close()
    assert events.dropped == 50
    warnings = [r for r in caplog.records if r.name == "kubecoord.history"]
    assert len(warnings) == 1, "logged once per kind of failure, not once per event"
    assert "No space left" in warnings[0].reason  # type: ignore[attr-defined]


def test_closed_file_object_is_counted_not_raised() -> None:
    buffer = io.StringIO()
    buffer.close()
    events = JsonlEventLog(buffer, backend="memory", namespace="ns")
    events.record(primitive="group", name="g", event="joined", member="m")
    events.close()
    assert events.dropped == 1


def test_missing_directory_is_counted_and_retried(tmp_path: Path) -> None:
    path = tmp_path / "later" / "h.jsonl"
    events = JsonlEventLog(path, backend="memory", namespace="ns", process="p")
    events.record(primitive="group", name="g", event="joined", member="m1")
    _wait_for(lambda: events.dropped == 1)
    path.parent.mkdir()
    events.record(primitive="group", name="g", event="joined", member="m2")
    events.close()
    assert [line["member"] for line in read_lines(path)] == ["m2"]
    assert events.dropped == 1


class StuckFile(io.StringIO):
    """A file whose writes hang until released: a disk that stopped answering."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def write(self, text: str) -> int:
        self.entered.set()
        self.release.wait(60)
        return super().write(text)


def test_record_never_blocks_on_a_stuck_disk() -> None:
    stuck = StuckFile()
    events = JsonlEventLog(stuck, backend="memory", namespace="ns", max_queued=5)
    events.record(primitive="kv", name="s", event="put", key="first", version=1)
    assert stuck.entered.wait(30)
    for i in range(100):  # returns at once although the writer is stuck: the test would hang otherwise
        events.record(primitive="kv", name="s", event="put", key=f"k{i}", version=1)
    assert events.dropped == 95  # the queue holds 5; the rest is dropped and counted
    stuck.release.set()
    events.close()
    assert len(stuck.getvalue().splitlines()) == 6


def test_record_after_close_is_counted(tmp_path: Path) -> None:
    events = JsonlEventLog(tmp_path / "h.jsonl", backend="memory", namespace="ns")
    events.close()
    events.close()  # idempotent
    events.record(primitive="group", name="g", event="joined", member="m")
    assert events.dropped == 1


def test_unserializable_values_are_written_as_text(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    events = JsonlEventLog(path, backend="memory", namespace="ns")
    events.record(primitive="group", name="g", event="joined", member=Path("m"))
    events.close()
    assert read_lines(path)[0]["member"] == "m"


def test_env_var_picks_the_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert type(open_event_log(None, backend="memory", namespace="ns")) is EventLog
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "env.jsonl"))
    log = open_event_log(None, backend="memory", namespace="ns")
    assert isinstance(log, JsonlEventLog)
    log.record(primitive="group", name="g", event="joined", member="m")
    log.close()
    assert read_lines(tmp_path / "env.jsonl")[0]["event"] == "joined"


def test_memory_backend_events_follow_the_schema(tmp_path: Path) -> None:
    clock = ManualClock()
    url = f"memory://history-{id(clock)}"
    path_a, path_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a = kubecoord.connect(url, clock=clock, lease_duration=5.0, history=path_a)
    b = kubecoord.connect(url, clock=clock, lease_duration=5.0, history=path_b)
    assert a.leader_election("svc").nominate("pa")
    assert not b.leader_election("svc").nominate("pb")
    a.group_membership("workers").join("wa")
    b.group_membership("workers").join("wb")
    kv = b.storage("store")
    kv.put("k", "v1")
    kv.update("k", "v2", expected_version=1)
    with pytest.raises(kubecoord.VersionConflictError):
        kv.update("k", "v3", expected_version=1)
    kv.delete("k")
    clock.advance(2.0)
    crash(a)
    clock.advance(5.0)
    b.close()

    a_events = read_lines(path_a)
    assert [(e["event"], e.get("member")) for e in a_events] == [
        ("acquired", "pa"), ("joined", "wa"), ("renewed", "pa"), ("renewed", "wa")
    ]
    acquired, _, renewed, _ = a_events
    assert acquired["epoch"] == 1
    # The holder's view under lease semantics: valid until its renew deadline, 0.9 of the
    # 5 s lease_duration after it wrote the record.
    assert parse_ts(acquired["valid_until"]) - parse_ts(acquired["ts"]) == pytest.approx(4.5)
    assert parse_ts(renewed["ts"]) - parse_ts(acquired["ts"]) == pytest.approx(2.0)

    b_events = [(e["event"], e.get("member"), e.get("key"), e.get("version")) for e in read_lines(path_b)]
    assert b_events == [
        ("joined", "wb", None, None),
        ("put", None, "k", 1), ("updated", None, "k", 2), ("conflict", None, "k", 1), ("deleted", None, "k", 2),
        ("acquired", "pb", None, None),
        ("expired", "wa", None, None),  # b watches the group, so it logs what it saw expire
        ("left", "wb", None, None),  # close() closes handles newest first
        ("resigned", "pb", None, None),
    ]
    times = [parse_ts(e["ts"]) for e in read_lines(path_b)]
    assert times[5] - parse_ts(acquired["ts"]) == pytest.approx(7.0), "takeover stamped on the manual clock"
    assert read_lines(path_b)[5]["epoch"] == 2


def _wait_for(predicate: Any) -> None:
    eventually(predicate, timeout=30)


def test_writes_under_a_fencing_epoch_carry_it(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with kubecoord.connect("memory://fencing-epoch", history=path) as coord:
        store = coord.storage("config")
        store.put("a", "1")
        store.fencing_epoch = 4
        store.update("a", "2")
        store.delete("a")
        with pytest.raises(kubecoord.InvalidArgumentError):
            store.fencing_epoch = -1
        with pytest.raises(kubecoord.InvalidArgumentError):
            store.fencing_epoch = True
        assert store.fencing_epoch == 4
        store.fencing_epoch = None
        store.put("a", "3")
    kv = [(line["event"], line.get("epoch")) for line in read_lines(path) if line["primitive"] == "kv"]
    assert kv == [("put", None), ("updated", 4), ("deleted", 4), ("put", None)]
