"""A leader's renewal whose outcome is unknown (Cassandra's CAS write timeout, as Paxos
contention with a seed peer's ``INSERT ... IF NOT EXISTS`` gives) never costs it the
election while its row is still its own: whether the renewal landed or not, it keeps
leading at the same epoch, and nobody else leads meanwhile.

Before the fix, a renewal that timed out without landing dropped the leader's tenure: its
next renewal took its own live row for a rival's, and it stepped down (seen in a fresh-clone
run of the seed interop test, where the seed peer then took over).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import cassandra
import pytest
from cassandra.policies import WriteType

import kubecoord
from tests.helpers import eventually

from .timings import TIMINGS

RENEWALS_TIMED_OUT = 3


class RenewalTimeouts:
    """Wraps the driver session: the next RENEWALS_TIMED_OUT renewals time out, either before
    reaching the server (``landed=False``) or after it applied them (``landed=True``)."""

    def __init__(self, driver_session: Any, *, landed: bool) -> None:
        self._execute = driver_session.execute
        self._landed = landed
        self.left = 0

    def __call__(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        text = getattr(getattr(query, "prepared_statement", None), "query_string", "")
        if self.left and text.startswith("UPDATE") and "IF tenure = ? AND epoch = ?" in text:
            self.left -= 1
            if self._landed:
                self._execute(query, *args, **kwargs)
            raise cassandra.WriteTimeout("CAS operation timed out (injected)", write_type=WriteType.CAS)
        return self._execute(query, *args, **kwargs)


def _events(history: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in history.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("landed", [False, True], ids=["lost-before-landing", "landed-answer-lost"])
def test_a_renewal_with_an_unknown_outcome_keeps_the_leader(cassandra_url: str, tmp_path: Path, landed: bool) -> None:
    service = f"unknown-{uuid.uuid4().hex[:8]}"
    history = tmp_path / "history.jsonl"
    options: dict[str, Any] = {**TIMINGS, "history": str(history)}
    with (
        kubecoord.connect(cassandra_url, **options) as coord,
        kubecoord.connect(cassandra_url, **TIMINGS) as observer_coordinator,
    ):
        election = coord.leader_election(service)
        observer = observer_coordinator.leader_election(service)
        election.nominate("a")
        eventually(lambda: election.is_leader("a"), 15)
        epoch = election.get_leader().epoch  # type: ignore[union-attr]
        driver_session = coord.session.session  # type: ignore[attr-defined]
        faults = RenewalTimeouts(driver_session, landed=landed)
        driver_session.execute = faults
        faults.left = RENEWALS_TIMED_OUT
        eventually(lambda: faults.left == 0, 10)
        # Two whole renew deadlines after the faults: still the leader, at the same epoch.
        deadline = time.monotonic() + 2 * TIMINGS["renew_deadline"]
        while time.monotonic() < deadline:
            assert election.is_leader("a")
            time.sleep(0.05)
        leader = observer.get_leader()
        assert leader is not None and (leader.id, leader.epoch) == ("a", epoch)
    kinds = [event["event"] for event in _events(history) if event.get("member") == "a"]
    assert kinds[0] == "acquired" and "lost" not in kinds, kinds
    assert kinds.count("renewed") >= 3
