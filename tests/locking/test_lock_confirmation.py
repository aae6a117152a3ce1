"""A Lock's own-id listener call that arrives before acquire() has recorded its token
still counts as the hold's confirmation: otherwise the hold's end (the listener's next
call) is taken for a call that predates the hold, and a lock whose candidate lost and
won the record back reports the ended hold as current, with its old token.

Found by tests/locking/test_state_machines.py (Lock and Semaphore machines, long form)."""

from __future__ import annotations

import uuid

import kubecoord
from kubecoord._core.lease import LeaderRecord
from kubecoord.backends.memory.coordinator import MemoryCoordinator
from kubecoord.backends.memory.records import RecordTable
from kubecoord.testing import ManualClock

from ..helpers import Fault, ScriptedTable


class SlowReads(ScriptedTable):
    """Reads wait for the coordinator's listener calls queued so far: the listener then
    runs before acquire() reads the leader it won (and records its token)."""

    coord: MemoryCoordinator | None = None

    def read(self, name: str) -> tuple[LeaderRecord, int] | None:
        if self.coord is not None:
            self.coord.context.dispatcher.flush(10.0)
        return super().read(name)


def test_a_hold_lost_and_won_back_is_not_reported_under_its_old_token() -> None:
    clock = ManualClock()
    coord = kubecoord.connect(f"memory://confirm-{uuid.uuid4().hex[:8]}", clock=clock, lease_duration=3.0)
    assert isinstance(coord, MemoryCoordinator)
    table = SlowReads(faulty_reads=False)
    coord.state.records = table
    try:
        lock = coord.lock("guarded-job", id="p0")
        table.coord = coord
        assert lock.acquire(blocking=False)
        table.coord = None
        assert lock.token == 1
        # Renewals every 1.2 s, renew deadline 2.7 s: the one at 1.2 is refused, the one at
        # 2.4 applied with its answer lost (the record now expires at 5.4). The hold under
        # token 1 ends at 2.7; at 5.4 the candidate takes the record again, at epoch 2.
        table.script = [Fault("fail"), Fault("lost")]
        clock.advance(6.0)
        coord.context.dispatcher.flush(10.0)
        current = RecordTable.read(table, "elections/guarded-job")
        assert current is not None and not table.script
        # Won back at epoch 2 (and, once the lock noticed its hold ended, withdrawn: released).
        assert current[0].transitions == 2 and current[0].holder in ("p0", "")
        assert not lock.is_held(), f"the hold under token {lock.token} ended at 2.7 s and is reported as current"
    finally:
        coord.close()
