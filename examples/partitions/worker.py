"""N replicas sharing the 64 partitions of a work queue: the group coordinator's worked example.

    python examples/partitions/worker.py              # memory://: three workers in this process
    KUBECOORD_URL=kubernetes://NAMESPACE MEMBER_ID=$HOSTNAME python worker.py   # one replica

Each worker is a member of the group "partitions" (kubecoord.group_coordinator.UnitsProtocol
with the cooperative-sticky assignor, KIP-429): it processes only the partitions it is
assigned, checks ensure_generation() before it commits an offset (a fenced worker never
commits), and leaves the group on SIGTERM so its partitions move at once. In the
Deployment (deployment.yaml) the Group has spec.assignment, so the operator assigns.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import kubecoord
from kubecoord.group_coordinator import UnitsProtocol

PARTITIONS = [str(p) for p in range(64)]  # "0".."63", the names the operator's spec.assignment uses


class Worker:
    def __init__(self, coordinator: kubecoord.Coordinator, member_id: str, *, session_timeout: float) -> None:
        self.name = member_id
        self.offsets: dict[str, int] = {}
        self.commits = 0
        self.fenced = 0
        self.protocol = UnitsProtocol(
            PARTITIONS, assignors=["cooperative-sticky"], on_assigned=self.started, on_revoked=self.stopped
        )
        self.member = coordinator.group_coordinator(
            "partitions", self.protocol, member_id=member_id, session_timeout=session_timeout
        )

    def started(self, partitions: list[str]) -> None:
        print(f"{self.name}: +{len(partitions)} partitions {_span(partitions)}", flush=True)

    def stopped(self, partitions: list[str]) -> None:
        print(f"{self.name}: -{len(partitions)} partitions {_span(partitions)} (offsets committed)", flush=True)

    def process_once(self) -> None:
        """Take one message from every owned partition and commit, behind the fence."""
        generation = self.member.generation
        for partition in self.protocol.owned:
            try:
                self.member.ensure_generation(generation)
            except kubecoord.CoordinationError:
                self.fenced += 1  # rebalancing or fenced: do not commit; the new owner resumes
                return
            self.offsets[partition] = self.offsets.get(partition, 0) + 1
            self.commits += 1


def _span(partitions: list[str]) -> str:
    return ",".join(partitions) if len(partitions) <= 8 else f"{','.join(partitions[:4])},...,{partitions[-1]}"


def run_in_memory(seconds: float = 3.0) -> None:
    """Three workers on memory://; one more joins, one leaves: watch the partitions move."""
    coordinators = [kubecoord.connect("memory://partitions") for _ in range(4)]
    workers = [Worker(c, f"worker-{i}", session_timeout=2.0) for i, c in enumerate(coordinators)]
    for worker in workers[:3]:
        worker.member.join(timeout=10)

    def tick(active: list[Worker], duration: float) -> None:
        end = time.monotonic() + duration
        while time.monotonic() < end:
            for worker in active:
                worker.process_once()
            time.sleep(0.01)

    tick(workers[:3], seconds / 3)
    print("worker-3 joins", flush=True)
    workers[3].member.join()
    tick(workers, seconds / 3)
    print("worker-0 leaves", flush=True)
    workers[0].member.leave()
    tick(workers[1:], seconds / 3)
    for worker in workers[1:]:
        worker.member.wait_stable(10)
    print("generation", workers[1].member.generation, flush=True)
    for worker in workers[1:]:
        print(f"{worker.name}: {len(worker.protocol.owned)} partitions, {worker.commits} commits", flush=True)
    owned = sorted(p for w in workers[1:] for p in w.protocol.owned)
    assert owned == sorted(PARTITIONS), "every partition has exactly one owner"
    for coordinator in coordinators:
        coordinator.close()


def run_replica(url: str, member_id: str) -> None:
    """One replica (a Pod of the Deployment): work until SIGTERM, then leave."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with kubecoord.connect(url) as coordinator:
        worker = Worker(coordinator, member_id, session_timeout=float(os.environ.get("SESSION_TIMEOUT", "10")))
        worker.member.join()
        while not stop.wait(1.0):
            worker.process_once()
        worker.member.leave()


if __name__ == "__main__":
    url = os.environ.get("KUBECOORD_URL", "memory://")
    if url.startswith("memory://"):
        run_in_memory(float(sys.argv[1]) if len(sys.argv) > 1 else 3.0)
    else:
        run_replica(url, os.environ.get("MEMBER_ID") or os.environ.get("HOSTNAME", "worker"))
