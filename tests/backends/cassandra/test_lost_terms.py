"""A leader that lost its election by its renew deadline while its row still lived (a renewal
landed, its answer lost and not resolvable, then Cassandra out of reach) leads again only
under a new epoch: its next term is an acquisition, never a renewal of the term it lost.

Before the fix, the handle kept the lost term's tenure (its token, epoch and last version):
once the row expired in the candidate's own view (from the version it had seen, older than
the renewal that landed), its acquisition went out as that tenure's renewal, which applied
to the still live row: a new term under the lost term's epoch (acquired, lost, acquired at
the same epoch), so writes fenced with it by the lost term's work were not told apart.

A real node; the faults are the driver session's (as in test_unknown_outcomes.py): one
renewal is applied and answered with a CAS write timeout, then every statement fails until
the leader has lost; afterwards only the handle's polls fail (so its view of the row is
the version it wrote, and the row it renewed lives on).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import cassandra
from cassandra.cluster import NoHostAvailable
from cassandra.policies import WriteType

import kubecoord
from kubecoord.api import LeaderElection
from tests.helpers import eventually

TIMINGS: dict[str, Any] = {"lease_duration": 12, "renew_deadline": 8.0, "retry_period": 6.0, "poll_period": 0.2}
"""Renewals 6 s apart: the renewal that landed keeps the row alive 6 s past the expiry the
candidate reckons from the version it saw, so its next acquisition finds the row there."""


class LostRenewal:
    """Wraps the driver session's execute: the next renewal is applied and answered with a
    CAS write timeout; then nothing answers until the leader lost; then only polls fail."""

    def __init__(self, driver_session: Any, election: LeaderElection) -> None:
        self._execute = driver_session.execute
        self._election = election
        self.phase = "armed"

    def __call__(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        text = getattr(getattr(query, "prepared_statement", None), "query_string", "")
        if self.phase == "armed" and text.startswith("UPDATE") and "IF tenure = ? AND epoch = ?" in text:
            self._execute(query, *args, **kwargs)  # applied
            self.phase = "dark"
            raise cassandra.WriteTimeout("CAS operation timed out (injected)", write_type=WriteType.CAS)
        if self.phase == "dark" and not self._election.is_leader("a"):
            self.phase = "polls fail"
        if self.phase == "dark":
            raise NoHostAvailable("injected: no host", {})
        serial = getattr(query, "consistency_level", None) == cassandra.ConsistencyLevel.SERIAL
        if self.phase == "polls fail" and text.startswith("SELECT") and not serial:
            raise NoHostAvailable("injected: no host", {})
        return self._execute(query, *args, **kwargs)


def test_a_leader_that_lost_while_its_row_lived_leads_again_under_a_new_epoch(
    cassandra_url: str, tmp_path: Path
) -> None:
    service = f"lost-{uuid.uuid4().hex[:8]}"
    history = tmp_path / "history.jsonl"
    with kubecoord.connect(cassandra_url, **TIMINGS, history=str(history)) as coord:
        election = coord.leader_election(service)
        assert election.nominate("a")
        driver_session = coord.session.session  # type: ignore[attr-defined]
        faults = LostRenewal(driver_session, election)
        driver_session.execute = faults
        eventually(lambda: faults.phase == "polls fail", 60)  # the renewal landed; the leader lost

        def terms() -> list[tuple[str, int]]:
            lines = [json.loads(line) for line in history.read_text().splitlines() if line.strip()]
            return [(e["event"], e["epoch"]) for e in lines if e.get("member") == "a"
                    and e["event"] in ("acquired", "renewed", "lost", "resigned")]

        eventually(lambda: [event for event, _ in terms()].count("acquired") >= 2, 60)
        acquired = [epoch for event, epoch in terms() if event == "acquired"]
        assert acquired == sorted(set(acquired)), terms()  # before: the lost term's epoch again
