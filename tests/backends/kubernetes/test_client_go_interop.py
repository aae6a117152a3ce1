"""kubecoord and client-go's leaderelection (LeaseLock, the ``le-candidate`` binary built
from Kubernetes' own tree) running for one Lease, on the emulator and the real server.

client-go's typed clients write Leases as protobuf; the emulator decodes those
(kubecoord_testkit.emulator.protobuf) since these tests found it answering 415.

Both sides use lease 2 s / renew deadline 1.5 s; kubecoord retries every 0.5 s, client-go
every 0.4 s (with client-go's jitter, up to 0.88 s). A leader's term, from its own point
of view: kubecoord from is_leader() true to false (or the kill); client-go from
started_leading to the signal that cancelled its context (its work stops there), the
stopped_leading callback, or the kill.
"""

from __future__ import annotations

import itertools
import os
import pathlib
import signal
import time
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from kubecoord_testkit.emulator import ApiEmulator

from .clusters import Cluster, EmulatorCluster, RealCluster
from .processes import Child, Children

pytestmark = pytest.mark.slow

LEASE_DURATION = 2.0
CLIENT_GO_TIMINGS = ("--lease-duration", "2s", "--renew-deadline", "1.5s", "--retry-period", "0.4s")
HANDOVER_LEASE = 6.0
"""The takeover test's lease on both sides: a takeover by expiry takes at least this long,
so one by release cannot be mistaken for it on a loaded machine."""
HANDOVER_TIMINGS = {"kubecoord": f"{HANDOVER_LEASE:g},4.5,0.5",
                    "client-go": ("--lease-duration", f"{HANDOVER_LEASE:g}s", "--renew-deadline", "4.5s",
                                  "--retry-period", "0.4s")}


@pytest.fixture(scope="module", params=["emulator", "real"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """As tests/backends/kubernetes/conftest.py's, but the emulator is one of this module's own that
    treats a request without credentials as admin: client-go (like kubectl) sends no bearer
    token over plain HTTP, and the emulator serves no TLS. The kubecoord candidates still
    act as their ServiceAccounts there; on the real server both kinds do."""
    if request.param == "real":
        yield RealCluster(request.getfixturevalue("real_api"), request.getfixturevalue("real_admin_api"),
                          request.getfixturevalue("real_namespace"))
        return
    with ApiEmulator(anonymous_admin=True) as api:
        kubeconfig = api.write_kubeconfig(tmp_path_factory.mktemp("interop") / "kubeconfig")
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        with k8s.ApiClient(configuration) as admin:
            yield EmulatorCluster(api, kubeconfig, admin)


@pytest.fixture(scope="module")
def client_role(cluster: Cluster) -> Iterator[None]:
    role = cluster.grant_namespace_clients()
    yield
    cluster.revoke(role)


@pytest.fixture
def fleet(cluster: Cluster, tmp_path: pathlib.Path, client_role: None) -> Iterator[Children]:
    started = Children(cluster, tmp_path)
    yield started
    started.close()


class Fleet:
    """Starts candidates of either kind for one Lease and tells who leads by its own account."""

    def __init__(self, children: Children, binary: pathlib.Path, lease: str, folder: pathlib.Path,
                 *, lease_duration: float = LEASE_DURATION) -> None:
        self.children, self.binary, self.lease, self.folder = children, binary, lease, folder
        long = lease_duration != LEASE_DURATION
        self.kubecoord_env = {**os.environ, "KUBECOORD_TIMINGS": HANDOVER_TIMINGS["kubecoord"]} if long else None
        self.client_go_timings = HANDOVER_TIMINGS["client-go"] if long else CLIENT_GO_TIMINGS
        self.kinds: dict[str, str] = {}
        self.serial = itertools.count()

    def start(self, kind: str) -> Child:
        name = f"{'kc' if kind == 'kubecoord' else 'go'}{next(self.serial)}-{uuid.uuid4().hex[:4]}"
        self.kinds[name] = kind
        if kind == "kubecoord":
            return self.children.start(name, "elect", self.lease, name, str(self.folder / f"{name}.jsonl"),
                                       env=self.kubecoord_env)
        return self.children.start_client_go(self.binary, name, self.lease, *self.client_go_timings)

    def wait_ready(self, child: Child) -> None:
        """Until the candidate has read the Lease and is waiting on it (process start-up is slow under load)."""
        ready = "nominated" if self.kinds[child.name] == "kubecoord" else "new_leader"
        child.wait_for(lambda line: line["event"] == ready, timeout=60)

    def leading(self, child: Child) -> bool:
        if self.kinds[child.name] == "kubecoord":
            return child.leading()
        events = [line["event"] for line in child.lines if line["event"] in ("started_leading", "stopped_leading",
                                                                              "signal")]
        return bool(events) and events[-1] == "started_leading" and child.process.poll() is None

    def wait_leader(self, cluster: Cluster, candidates: list[Child], timeout: float = 30) -> Child:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            held = cluster.holder(self.lease)
            for child in candidates:
                if held and held[0] == child.name and self.leading(child):
                    return child
            time.sleep(0.03)
        raise AssertionError(f"no leader among {[c.name for c in candidates]}; lease: {cluster.holder(self.lease)}")

    def intervals(self) -> list[tuple[float, float, str]]:
        result = []
        for child in self.children:
            start: float | None = None
            for line in child.lines:
                t = line.get("t", line.get("ts"))
                event = line["event"]
                begins = (event == "is_leader" and line["value"]) or event == "started_leading"
                ends = (event == "is_leader" and not line["value"]) or event in ("stopped_leading", "signal")
                if begins and start is None:
                    start = t
                elif ends and start is not None:
                    result.append((start, t, child.name))
                    start = None
            if start is not None:
                result.append((start, child.killed_at or time.time(), child.name))
        return sorted(result)

    def assert_never_two_leaders(self) -> None:
        for (_, end, who), (start, _, next_who) in itertools.pairwise(self.intervals()):
            assert start >= end, f"{next_who} led from {start} while {who} led until {end}"


def _exit(child: Child, how: str) -> float:
    """Stop ``child`` (SIGTERM: it releases; kill: it does not); returns when the Lease was free."""
    if how == "kill":
        child.kill()
        assert child.killed_at is not None
        return child.killed_at
    child.signal(signal.SIGTERM)
    assert child.process.wait(30) == 0
    child.kill()  # reap and join the reader
    done = [line for line in child.lines if line["event"] in ("closed", "exit")]
    assert done, child.lines[-5:]
    return float(done[-1].get("t", done[-1].get("ts")))


def _release_failed(child: Child) -> bool:
    """Whether client-go said its release failed. It does when SIGTERM cancels a renewal in
    flight that the server applied: LeaseLock keeps the older resourceVersion, so the
    release's update answers 409 and the Lease is left to expire (about 1 in 40 SIGTERMs on
    a loaded machine). kubecoord's release rereads the record once on a conflict instead."""
    return child.stderr is not None and "Failed to release lock" in child.stderr.read_text()


def _started(child: Child) -> float:
    line = next(line for line in reversed(child.lines)
                if line["event"] == "started_leading" or (line["event"] == "is_leader" and line["value"]))
    return float(line.get("t", line.get("ts")))


def test_takeover_both_ways_for_every_kind_of_exit(
    cluster: Cluster, fleet: Children, le_candidate: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """Leader and followers of opposite kinds, so each round has a fixed direction:
    kubecoord -> client-go and back, by release (SIGTERM) and by expiry (kill -9)."""
    lease = f"interop-{uuid.uuid4().hex[:8]}"
    candidates = Fleet(fleet, le_candidate, lease, tmp_path, lease_duration=HANDOVER_LEASE)
    leader = candidates.start("kubecoord")
    candidates.wait_leader(cluster, [leader])
    epoch = cluster.holder(lease)[1]  # type: ignore[index]
    handovers: list[tuple[str, str, float]] = []
    for how in ("term", "term", "kill", "kill"):
        other = "client-go" if candidates.kinds[leader.name] == "kubecoord" else "kubecoord"
        followers = [candidates.start(other) for _ in range(2)]
        for follower in followers:
            candidates.wait_ready(follower)
        freed = _exit(leader, how)
        successor = candidates.wait_leader(cluster, followers)
        for follower in followers:  # keep one candidate per round: the next round's direction is fixed
            if follower is not successor:
                _exit(follower, "term")
        latency = _started(successor) - freed
        handovers.append((f"{candidates.kinds[leader.name]} {how} -> {other}", "", latency))
        if how == "term" and not _release_failed(leader):
            # A released Lease is taken at the follower's next try, not after it expires.
            assert latency < HANDOVER_LEASE, handovers
        now = cluster.holder(lease)
        assert now is not None and now[1] > epoch, (now, epoch)  # leaseTransitions is the epoch: it grew
        epoch = now[1]
        leader = successor
    candidates.assert_never_two_leaders()
    print("handover latencies:", [(what, round(seconds, 3)) for what, _, seconds in handovers])


def test_a_mixed_fleet_never_has_two_leaders(
    cluster: Cluster, fleet: Children, le_candidate: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """Two kubecoord and two client-go candidates; the leader exits (alternately released
    and killed) and is replaced by a candidate of its kind, four times."""
    lease = f"fleet-{uuid.uuid4().hex[:8]}"
    candidates = Fleet(fleet, le_candidate, lease, tmp_path)
    live = [candidates.start(kind) for kind in ("kubecoord", "client-go", "kubecoord", "client-go")]
    for child in live:
        candidates.wait_ready(child)
    leader = candidates.wait_leader(cluster, live)
    leaders = []
    for how in ("term", "kill", "term", "kill"):
        leaders.append(candidates.kinds[leader.name])
        _exit(leader, how)
        live.remove(leader)
        live.append(candidates.start(candidates.kinds[leader.name]))
        candidates.wait_ready(live[-1])
        leader = candidates.wait_leader(cluster, live)
    candidates.assert_never_two_leaders()
    assert len(candidates.intervals()) >= 5

