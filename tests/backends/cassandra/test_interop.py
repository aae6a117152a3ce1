"""A seed-plugin peer (the KIP-30 Cassandra plugin's exact statements) and kubecoord
candidates share one election: never both leading, in both directions, through kill -9
of either and a kubecoord resign.

The epoch lives in its own row (election_rows.py), so after a kubecoord leader dies its
holder row expires whole and the seed's ``INSERT ... IF NOT EXISTS`` applies again.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import cast

import pytest

import kubecoord
from tests.helpers import eventually

from .processes import Peer, assert_no_overlap, described_on_failure, spawn_candidate, spawn_seed, stop_all
from .timings import TIMINGS

KEYSPACE = "kubecoord_test"


def _leader(election: kubecoord.LeaderElection) -> str | None:
    leader = election.get_leader()
    return leader.id if leader else None


@pytest.mark.slow
def test_seed_peers_and_kubecoord_candidates_never_lead_at_once(cassandra_url: str, tmp_path: Path) -> None:
    host = cassandra_url.split("//")[1].split("/")[0].split(",")[0]
    service = f"interop-{uuid.uuid4().hex[:8]}"
    peers: list[Peer] = []
    try:
        with described_on_failure(peers), kubecoord.connect(cassandra_url, **TIMINGS) as observer_coordinator:
            observer = observer_coordinator.leader_election(service)
            # 1. A seed peer leads; a kubecoord candidate waits behind it.
            seed1 = spawn_seed(host, KEYSPACE, service, "seed1", tmp_path)
            peers.append(seed1)
            eventually(lambda: _leader(observer) == "seed1", 15)
            k1 = spawn_candidate(cassandra_url, service, "k1", tmp_path)
            peers.append(k1)
            time.sleep(3)
            assert _leader(observer) == "seed1" and not k1.intervals()
            # 2. kill -9 of the seed leader: kubecoord takes over once its row expired.
            seed1.stop(kill=True)
            eventually(lambda: _leader(observer) == "k1", 15)
            seed2 = spawn_seed(host, KEYSPACE, service, "seed2", tmp_path)
            peers.append(seed2)
            time.sleep(3)
            assert _leader(observer) == "k1" and not seed2.intervals()
            # 3. kill -9 of the kubecoord leader: its holder row expires whole (the epoch is
            #    elsewhere) and the seed's INSERT IF NOT EXISTS applies.
            k1.stop(kill=True)
            eventually(lambda: _leader(observer) == "seed2", 15)
            k2 = spawn_candidate(cassandra_url, service, "k2", tmp_path)
            peers.append(k2)
            # 4. kill -9 of that seed leader: kubecoord leads again, at a higher epoch.
            seed2.stop(kill=True)
            eventually(lambda: _leader(observer) == "k2", 15)
            # 5. A kubecoord leader resigning (SIGTERM -> close) hands over to a seed peer.
            seed3 = spawn_seed(host, KEYSPACE, service, "seed3", tmp_path)
            peers.append(seed3)
            k2.stop(kill=False)
            eventually(lambda: _leader(observer) == "seed3", 15)
            eventually(lambda: bool(seed3.intervals()), 5)
    finally:
        stop_all(peers)
    intervals = assert_no_overlap(peers)
    # A candidate may lose and win again (a renewal late on a loaded machine): one turn each.
    turns = [who for index, (*_, who) in enumerate(intervals) if index == 0 or intervals[index - 1][3] != who]
    assert turns == ["seed1", "k1", "seed2", "k2", "seed3"]
    # The kubecoord candidates' "acquired" events carry the epoch (the seed peers' do not).
    epochs = [cast(int, epoch) for _, _, epoch, who in intervals if who.startswith("k")]
    assert epochs == sorted(set(epochs)) and len(epochs) >= 2
