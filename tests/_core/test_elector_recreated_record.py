"""A record re-created (or edited) free behind a holder's back, at an epoch below the
high-water mark: kubectl delete + apply of a Lease manifest gives a Lease with no holder and
leaseTransitions 0. It is no release — the last holder may lead until its renew deadline —
so a candidate waits a whole lease from when it saw it, as for a deleted record (5a); the
holder learns it lost at its next step. A genuine release keeps the term's epoch (client-go
writes leaseTransitions unchanged), which the mark never exceeds, and is taken at once.

The lease core over memory://'s record table, on a manual clock.
"""

from __future__ import annotations

from kubecoord._core.lease import Elector, LeaderRecord, Timings
from kubecoord.backends.memory.records import RecordTable, TableView
from kubecoord.testing import ManualClock

from ..helpers import elector

NAME = "elections/billing"
TIMINGS = Timings(lease_duration=3.0, renew_deadline=2.0, retry_period=1.0)


def _candidate(name: str, table: RecordTable, clock: ManualClock) -> Elector:
    view = TableView(table, NAME, clock)
    view.deliver()

    def watch() -> None:  # the table's watch: every write is observed at once
        view.deliver()

    table.subscribe(NAME, watch)
    return elector(name, view, clock, TIMINGS, service="billing")


def _recreate_free(table: RecordTable) -> None:
    current = table.read(NAME)
    assert current is not None
    table.write(NAME, LeaderRecord("", 0, None, None, 0), current[1])


def test_a_record_recreated_free_below_the_mark_is_waited_out_a_whole_lease() -> None:
    clock, table = ManualClock(), RecordTable()
    holder = _candidate("a", table, clock)
    holder.step()
    assert holder.is_leader() and holder.epoch == 1
    _recreate_free(table)
    newcomer = _candidate("b", table, clock)  # never saw the held record
    newcomer.step()
    assert holder.is_leader() and not newcomer.is_leader()  # before: both led
    holder.step()  # its watch shows the record changed under it: lost
    assert not holder.is_leader()
    clock.advance(TIMINGS.lease_duration - 0.1)
    newcomer.step()
    assert not newcomer.is_leader()
    clock.advance(0.1)
    newcomer.step()
    assert newcomer.is_leader() and newcomer.epoch == 2


def test_a_release_is_taken_at_once() -> None:
    clock, table = ManualClock(), RecordTable()
    holder = _candidate("a", table, clock)
    holder.step()
    assert holder.release() and not holder.is_leader()
    newcomer = _candidate("b", table, clock)
    newcomer.step()
    assert newcomer.is_leader() and newcomer.epoch == 2


def _free_at(table: RecordTable, transitions: int) -> None:
    """A hand's edit of the held record: holderIdentity cleared (kubectl patch), or the record
    re-created free from a manifest carrying ``leaseTransitions``: not a release's shape."""
    current = table.read(NAME)
    assert current is not None
    record = current[0]._replace(holder="", transitions=transitions)
    table.write(NAME, record, current[1])


def test_a_record_edited_free_at_the_mark_is_waited_out_a_whole_lease() -> None:
    clock, table = ManualClock(), RecordTable()
    holder = _candidate("a", table, clock)
    holder.step()
    assert holder.is_leader() and holder.epoch == 1
    _free_at(table, 1)
    newcomer = _candidate("b", table, clock)
    newcomer.step()
    assert holder.is_leader() and not newcomer.is_leader()
    holder.step()
    assert not holder.is_leader()
    clock.advance(TIMINGS.lease_duration)
    newcomer.step()
    assert newcomer.is_leader() and newcomer.epoch == 2


def test_a_record_recreated_free_above_the_mark_is_waited_out_a_whole_lease() -> None:
    clock, table = ManualClock(), RecordTable()
    holder = _candidate("a", table, clock)
    holder.step()
    _free_at(table, 100)
    newcomer = _candidate("b", table, clock)
    newcomer.step()
    assert holder.is_leader() and not newcomer.is_leader()
    holder.step()
    clock.advance(TIMINGS.lease_duration)
    newcomer.step()
    assert newcomer.is_leader() and newcomer.epoch == 101


def test_a_release_over_an_epoch_edited_down_is_taken_at_once() -> None:
    """The holder's release after its record's epoch was edited down (before its renewal
    wrote it back up) frees it at the holder's epoch, not below the mark."""
    clock, table = ManualClock(), RecordTable()
    holder = _candidate("a", table, clock)
    holder.step()
    current = table.read(NAME)
    assert current is not None
    table.write(NAME, current[0]._replace(transitions=0), current[1])
    assert holder.release()
    newcomer = _candidate("b", table, clock)
    newcomer.step()
    assert newcomer.is_leader() and newcomer.epoch == 2
