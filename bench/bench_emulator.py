"""API emulator figures: what one request and one watch event cost, so that the
Kubernetes backend's figures measured on the emulator can be read against them.

    .venv/bin/python bench/bench_emulator.py [--rounds N] [--watchers N]

Through the official kubernetes client (one connection pool, one thread), it prints
p50/p99 latency and requests per second for get, merge-patch and create+delete of a
Lease; the latency from a patch's response to the MODIFIED event in a watch on another
connection; the same with N concurrent watchers (fan-out); and the requests the emulator
recorded per operation. The official client's own overhead (model (de)serialisation) is
included, as it is in the backend's figures. Wall-clock figures on a shared machine are
noisy; the load average is printed alongside.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import kubernetes
import urllib3

from kubecoord_testkit.emulator import ApiEmulator
from measure import pct


def timed(rounds: int, operation: Callable[[int], object]) -> list[float]:
    samples = []
    for n in range(rounds):
        start = time.perf_counter()
        operation(n)
        samples.append(time.perf_counter() - start)
    return samples


def report(label: str, samples: list[float], *, rate: bool = True) -> None:
    line = f"{label:<34} p50 {pct(samples, 50) * 1000:7.2f} ms   p99 {pct(samples, 99) * 1000:7.2f} ms"
    if rate:  # one thread, one request at a time: calls per second
        line += f"   {len(samples) / sum(samples):6.0f} calls/s"
    print(line)


def watch_latency(
    kubeconfig: Path, leases: kubernetes.client.CoordinationV1Api, rounds: int, watchers: int
) -> list[float]:
    """Patch response -> the event seen by every one of ``watchers`` watches (the slowest)."""
    seen: dict[str, list[float]] = {}
    lock = threading.Condition()
    ready = threading.Barrier(watchers + 1)
    listed = leases.list_namespaced_lease("default").metadata
    assert listed is not None
    rv = listed.resource_version

    def consume() -> None:
        client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
        own = kubernetes.client.CoordinationV1Api(client)
        stream = cast(  # _preload_content=False: the client returns the urllib3 response
            urllib3.HTTPResponse,
            own.list_namespaced_lease(
                "default",
                watch=True,
                resource_version=rv,
                timeout_seconds=300,
                field_selector="metadata.name=watched",
                _preload_content=False,
            ),
        )
        ready.wait()
        count = 0
        for line in stream:
            if not line.strip():
                continue
            event = kubernetes.watch.Watch().unmarshal_event(line.decode(), "V1Lease")  # type: ignore[no-untyped-call]
            holder = event["object"].spec.holder_identity
            with lock:
                seen.setdefault(holder, []).append(time.perf_counter())
                lock.notify_all()
            count += 1
            if count == rounds:
                break
        stream.close()
        client.close()

    threads = [threading.Thread(target=consume, daemon=True) for _ in range(watchers)]
    for thread in threads:
        thread.start()
    ready.wait()
    time.sleep(0.2)  # the watches are registered once their requests were answered
    samples = []
    for n in range(rounds):
        holder = f"h{n}"

        def all_saw(holder: str = holder) -> bool:
            return len(seen.get(holder, [])) == watchers

        leases.patch_namespaced_lease("watched", "default", {"spec": {"holderIdentity": holder}})
        answered = time.perf_counter()
        with lock:
            lock.wait_for(all_saw, timeout=30)
            samples.append(max(seen[holder]) - answered)
    for thread in threads:
        thread.join(30)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--watchers", type=int, default=20)
    args = parser.parse_args()
    with ApiEmulator() as api, tempfile.TemporaryDirectory() as tmp:
        kubeconfig = api.write_kubeconfig(Path(tmp) / "kubeconfig")
        client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
        leases = kubernetes.client.CoordinationV1Api(client)
        body = {"metadata": {"name": "x"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}
        leases.create_namespaced_lease(
            "default",
            body,  # type: ignore[arg-type]  # the client serializes a dict body as it is
        )
        leases.create_namespaced_lease(
            "default",
            {  # type: ignore[arg-type]  # the client serializes a dict body as it is
                **body,
                "metadata": {"name": "watched"},
            },
        )
        print(f"load average {os.getloadavg()[0]:.1f}, {args.rounds} rounds")
        api.reset_requests()
        report("get lease", timed(args.rounds, lambda n: leases.read_namespaced_lease("x", "default")))
        report(
            "merge-patch lease",
            timed(
                args.rounds,
                lambda n: leases.patch_namespaced_lease("x", "default", {"spec": {"holderIdentity": f"h{n}"}}),
            ),
        )

        def create_delete(n: int) -> None:
            leases.create_namespaced_lease(
                "default",
                {  # type: ignore[arg-type]  # the client serializes a dict body as it is
                    **body,
                    "metadata": {"name": f"c{n}"},
                },
            )
            leases.delete_namespaced_lease(f"c{n}", "default")

        report("create + delete lease", timed(args.rounds, create_delete))
        per_op = len(api.requests) / (4 * args.rounds)
        report("patch -> event, 1 watcher", watch_latency(kubeconfig, leases, args.rounds, 1), rate=False)
        fanned = watch_latency(kubeconfig, leases, args.rounds // 3, args.watchers)
        report(f"patch -> event, all {args.watchers} watchers", fanned, rate=False)
        print(f"requests recorded per client call: {per_op:.2f}")
        client.close()


if __name__ == "__main__":
    main()
