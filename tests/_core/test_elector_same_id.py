"""A record naming an elector's id at an epoch above any that elector wrote is another
elector's term under the same id: the elector never releases it, and resign() never counts
it as its own.

Two electors share an id when a candidate is withdrawn twice at once — ElectionLock ends a
lost hold by closing its election handle on a thread of its own while the next acquire()
closes it too and nominates the same id on a new handle: the later of the two releases
(the first one failed: the API was slow) could run after the new attempt acquired. Before,
that release re-read the record, found it naming the id, and freed it: the new attempt led
in its own view while another candidate took the record at once (two leaders). Likewise a
process restarted under its predecessor's id.

The lease core over memory://'s record table, on a manual clock.
"""

from __future__ import annotations

from kubecoord._core.lease import Elector, LeaderRecord, Observation, Timings
from kubecoord.backends.memory.records import RecordTable, TableView
from kubecoord.errors import BackendUnavailableError
from kubecoord.testing import ManualClock

from ..helpers import NoMetrics
from ..helpers import elector as memory_elector

NAME = "elections/billing"
TIMINGS = Timings(lease_duration=3.0, renew_deadline=2.0, retry_period=1.0)


class FlakyView(TableView):
    """A view whose next ``failing`` writes raise BackendUnavailableError, unsent."""

    failing = 0

    def update(self, record: LeaderRecord, version: str, timeout: float) -> Observation:
        if self.failing:
            self.failing -= 1
            raise BackendUnavailableError("injected: the API server is slow")
        return super().update(record, version, timeout)


def _elector(candidate: str, table: RecordTable, clock: ManualClock) -> tuple[Elector, FlakyView]:
    view = FlakyView(table, NAME, clock)
    view.deliver()

    def watch() -> None:  # the table's watch: every write is observed at once
        view.deliver()

    table.subscribe(NAME, watch)
    elector = memory_elector(candidate, view, clock, TIMINGS, service="billing", metrics=NoMetrics(), wall=clock.now,
                             request_timeout=1.0)
    return elector, view


def _holder(table: RecordTable) -> tuple[str, int]:
    current = table.read(NAME)
    assert current is not None
    return current[0].holder, current[0].transitions


def test_a_release_sent_again_late_never_frees_a_new_attempt_under_the_same_id() -> None:
    clock, table = ManualClock(), RecordTable()
    first, first_view = _elector("x", table, clock)
    first.step()
    assert first.is_leader() and first.epoch == 1
    first_view.failing = 1
    assert not first.release()  # failed: the record still names x at epoch 1, and expires
    second, _ = _elector("x", table, clock)  # the next attempt, under the same id
    second.step()  # waits for the record to expire
    clock.advance(TIMINGS.lease_duration)
    second.step()
    assert second.is_leader() and second.epoch == 2
    rival, _ = _elector("y", table, clock)
    rival.step()
    assert not rival.is_leader()
    assert not first.release()  # the first withdrawal's release, sent again late
    assert _holder(table) == ("x", 2)  # before: released, and the rival took it at once
    rival.step()
    assert second.is_leader() and not rival.is_leader()


def test_resign_of_a_follower_never_counts_a_leaders_record_under_its_id_as_its_own() -> None:
    clock, table = ManualClock(), RecordTable()
    leader, _ = _elector("x", table, clock)
    leader.step()
    twin, _ = _elector("x", table, clock)  # e.g. a process restarted under the leader's id
    twin.step()
    assert leader.is_leader() and not twin.is_leader()
    assert not twin.holds()  # before: True, and the twin's resign released the leader's record
    assert not twin.release()
    assert _holder(table) == ("x", 1) and leader.is_leader()


def test_its_own_term_edited_or_lapsed_is_still_released() -> None:
    clock, table = ManualClock(), RecordTable()
    elector, _ = _elector("x", table, clock)
    elector.step()
    current = table.read(NAME)
    assert current is not None
    record, version = current
    table.write(NAME, record._replace(data="edited", transitions=0), version)  # edited down
    clock.advance(TIMINGS.renew_deadline)  # its deadline lapsed, nobody took over
    assert not elector.is_leader() and elector.holds()
    assert elector.release()
    assert _holder(table) == ("", 0)
