"""Scale benchmarks on the real kube-apiserver (kubecoord_testkit.servers.kubernetes.RealApiServer).

    python bench/bench_scale.py kv        # bytes per single-key update vs store size (~2 min)
    python bench/bench_scale.py client    # one process, 1,000 election handles + 100 stores
    python bench/bench_scale.py operator  # 5,000 LeaderElections + 1,000 Groups + 1,000 KVStores
    python bench/bench_scale.py handles   # a client with 200 election handles, watch per Lease:
                                          # threads, RSS, event latency; before/after the watch
                                          # multiplexer in the same run (--before REV)
    python bench/bench_scale.py memory    # Python memory of one handle of each kind as the
                                          # operator's status mirrors held them, and of the
                                          # handle-less cached mirrors it holds now (1,000 each)

Each prints its figures, the load average before and after (the machine is shared: read
absolute times with it) and exits 0; without the kube-apiserver binaries it says why and
exits 0 without figures (a fresh machine). API requests are counted from the server's own
``apiserver_request_total`` (every client; the bench subtracts the requests it made
itself), threads and RSS from /proc.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import json
import os
import pathlib
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable
from typing import Any, cast

import kubernetes.client
import kubernetes.config
import urllib3
import yaml

import kubecoord
from kubecoord.capabilities import StateCache, require
from kubecoord.operator.controller.owners import RouteIndex
from kubecoord.operator.kinds.group.cached import CachedGroupMirror
from kubecoord.operator.kinds.kvstore import CachedStoreMirror
from kubecoord.operator.kinds.leaderelection import CachedLeaderMirror
from kubecoord.wire.kv_shards import SHARD_BYTES, shard_count_for
from kubecoord_testkit import processes
from kubecoord_testkit.servers.kubernetes import RealApiServer
from measure import cpu_seconds, load, ms, pct, rss_and_threads
from real_server import RequestCounter, real_server

ROOT = pathlib.Path(__file__).resolve().parents[1]

GROUP, VERSION = "kubecoord.dev", "v1alpha1"


def admin(server: RealApiServer) -> kubernetes.client.ApiClient:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(server.admin_kubeconfig), client_configuration=configuration
    )
    configuration.connection_pool_maxsize = 16
    return kubernetes.client.ApiClient(configuration)


def namespace(api: kubernetes.client.ApiClient, name: str) -> str:
    with contextlib.suppress(kubernetes.client.ApiException):
        kubernetes.client.CoreV1Api(api).create_namespace(
            {"metadata": {"name": name}}  # type: ignore[arg-type]  # the client serializes a dict body as it is
        )
    return name


# -- KV: bytes per single-key update ----------------------------------------------------------
class BodyMeter:
    """Counts the bytes of every ConfigMap body a coordinator's client sends."""

    def __init__(self, coordinator: kubecoord.Coordinator) -> None:
        self.sent: list[int] = []
        client = coordinator._context.client  # type: ignore[attr-defined]
        for verb in ("create", "replace"):
            original = getattr(client, verb)

            def wrapped(*args: Any, _original: Callable[..., Any] = original, **kwargs: Any) -> Any:
                body = kwargs.get("body", args[-1])
                self.sent.append(len(json.dumps(body, separators=(",", ":")).encode()))
                return _original(*args, **kwargs)

            setattr(client, verb, wrapped)


def bench_kv(server: RealApiServer) -> None:
    print("KV: bytes sent by one single-key update, by store size (value 1 KiB; same store, other keys fill it)")
    print("| store size | shards | sharded: bytes per update | one ConfigMap: bytes per update | ratio |")
    print("| --- | --- | --- | --- | --- |")
    sizes = [1 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20, 8 << 20]
    for size in sizes:
        results: dict[str, str] = {}
        figures: dict[str, int] = {}
        for design, shards in (("sharded", shard_count_for(size)), ("one", 1)):
            store = f"kv-{design}-{size}"
            with kubecoord.connect(
                "kubernetes://default", kubeconfig=str(server.admin_kubeconfig), kv_shards=shards,
                max_value_bytes=64 * 1024,
            ) as coord:
                kv = coord.storage(store)
                chunk = min(size, 60 * 1024)
                filled, index = 0, 0
                try:
                    while filled + chunk <= size:
                        kv.put(f"fill/{index}", "f" * (chunk - 64))
                        filled += chunk
                        index += 1
                    kv.put("hot", "x" * 1024)
                    meter = BodyMeter(coord)
                    for round_ in range(5):
                        kv.update("hot", str(round_) * 1024)
                    figures[design] = int(statistics.median(meter.sent))
                    results[design] = f"{figures[design]:,}"
                except kubecoord.StoreFullError:
                    results[design] = f"refused at {filled:,} bytes (StoreFullError: one ConfigMap holds 1 MiB)"
        ratio = f"{figures['one'] / figures['sharded']:.1f}x" if len(figures) == 2 else "—"
        print(f"| {size // 1024:,} KiB | {shard_count_for(size)} | {results['sharded']} | {results['one']} | {ratio} |")
    print(f"(a shard holds at most {SHARD_BYTES:,} bytes; every watcher of the store receives the same bytes)")


# -- client: 1,000 election handles and 100 stores in one process -----------------------------
def bench_client(server: RealApiServer, elections: int, stores: int, handovers: int) -> None:
    counter = RequestCounter(server)
    ns = namespace(admin(server), "bench-client")
    options: dict[str, Any] = {
        "kubeconfig": str(server.admin_kubeconfig), "watch_scope": "namespace",
    }  # client-go's default timings: leaders renew every 2 s
    base_rss, base_threads = rss_and_threads(os.getpid())
    before, started = counter.total(), time.monotonic()
    time.sleep(20)
    baseline = (counter.total() - before) / (time.monotonic() - started)  # the API server's own clients
    with kubecoord.connect(f"kubernetes://{ns}", **options) as coord:
        handles = [coord.leader_election(f"svc-{i:04d}") for i in range(elections)]
        for handle in handles:
            handle.get_leader()
        kv = [coord.storage(f"store-{i:03d}") for i in range(stores)]
        for i, store in enumerate(kv):
            store.put("config", str(i))
        leaders = 0
        for i in range(0, elections, 10):  # a candidate in every tenth election: 100 leaders renewing
            leaders += handles[i].nominate(f"pod-{i}")
        time.sleep(3)
        rss, threads = rss_and_threads(os.getpid())
        informers = coord._context.informers.open_informers  # type: ignore[attr-defined]
        print(f"client: {elections} election handles ({leaders} leading), {stores} stores, watch_scope=namespace")
        kinds: dict[str, int] = {}
        for thread in threading.enumerate():
            kind = re.sub(r"[-_]?\d+$", "", thread.name.split("[")[0])
            kinds[kind] = kinds.get(kind, 0) + 1
        print(f"  threads {threads} ({threads - base_threads} more than before connecting: "
              f"{', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}), open watches {informers}, "
              f"RSS {rss:.0f} MiB (+{rss - base_rss:.0f} MiB)")
        for handle in handles[::10]:
            handle.close()  # resign: the rest only observe
        time.sleep(2)
        before, started = counter.total(), time.monotonic()
        time.sleep(30)
        idle = (counter.total() - before) / (time.monotonic() - started)
        print(f"  idle (observing only): {max(0.0, idle - baseline):.2f} API requests/s from this process "
              f"({idle:.2f} at the server, {baseline:.2f} before connecting: the server's own clients)")

        # Handover: a second process-like coordinator takes over when the first resigns.
        with kubecoord.connect(f"kubernetes://{ns}", **options) as other:
            times: list[float] = []
            for i in range(handovers):
                name = f"hand-{i:03d}"
                mine, theirs = coord.leader_election(name), other.leader_election(name)
                assert mine.nominate("a")
                theirs.nominate("b")
                took = threading.Event()

                def on_leader(leader: str | None, took: threading.Event = took) -> None:
                    if leader == "b":
                        took.set()

                theirs.add_listener(on_leader)
                started = time.monotonic()
                mine.resign("a")
                took.wait(30)
                times.append(time.monotonic() - started)
                mine.close()
                theirs.close()
            print(f"  handover, resign -> the other process leads: {ms(times)}")


# -- handles: one client process with 200 election handles in the default (per-object) scope -----
CHILD = ROOT / "tests" / "kubernetes" / "child.py"
BEFORE_REV = "36c434b"
"""main just before the watch multiplexer: a thread per watch."""


def _tree_at(rev: str, into: pathlib.Path) -> pathlib.Path | None:
    """operator/ of ``rev`` unpacked into ``into`` (for PYTHONPATH), or None without git history."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "operator/kubecoord"], capture_output=True)
    if archive.returncode != 0:
        print(f"  (no {rev} in this checkout: {archive.stderr.decode().strip()}; 'before' skipped)")
        return None
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "operator"


def _client_run(server: RealApiServer, ns: str, label: str, handles: int, every: int,
                pythonpath: pathlib.Path | None) -> None:
    """One child.py ``handles`` process: threads and RSS when ready, then the latency from a
    write returning in this process to the child's listener call, for each observed election."""
    prefix = f"{label}-{os.urandom(3).hex()}"
    env = {**os.environ, "KUBECOORD_URL": f"kubernetes://{ns}", "KUBECOORD_TIMINGS": "15,10,2"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    process = subprocess.Popen([sys.executable, str(CHILD), "handles", str(server.admin_kubeconfig), prefix,
                                str(handles), str(every)], stdout=subprocess.PIPE, env=env, text=True)
    lines: list[dict[str, Any]] = []
    cond = threading.Condition()

    def read() -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            with cond:
                lines.append(json.loads(raw))
                cond.notify_all()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def wait(predicate: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
        with cond:
            found: list[dict[str, Any]] = []

            def any_found() -> bool:
                found.extend(x for x in lines if predicate(x))
                return bool(found)

            cond.wait_for(any_found, timeout)
            if not found:
                raise RuntimeError(f"{label}: the child never said it; last lines {lines[-3:]}")
            return found[0]

    try:
        started = time.monotonic()
        ready = wait(lambda line: line["event"] == "ready", 600)
        opened = time.monotonic() - started
        latencies: list[float] = []
        with kubecoord.connect(f"kubernetes://{ns}", kubeconfig=str(server.admin_kubeconfig)) as writer:
            for i in range(handles):
                if every and i % every == 0:
                    continue  # the child runs for these: not a change seen from outside

                def heard(line: dict[str, Any], i: int = i) -> bool:
                    return bool(line["event"] == "leader" and line["index"] == i and line["value"] == "writer")

                election = writer.leader_election(f"{prefix}-{i}")
                election.nominate("writer")
                written = time.time()
                seen = wait(heard, 30)
                latencies.append(seen["t"] - written)
                election.close()
        print(f"| {label} | {ready['threads']} | {ready['rss_mib']:.0f} | "
              f"{statistics.median(latencies) * 1000:.1f} | {pct(latencies, 99) * 1000:.1f} | "
              f"{max(latencies) * 1000:.1f} | {len(latencies)} | {opened:.1f} |", flush=True)
    finally:
        process.kill()
        process.wait()
        reader.join(5)


def bench_handles(server: RealApiServer, handles: int, before: str | None) -> None:
    ns = namespace(admin(server), "bench-handles")
    print(f"One client process with {handles} election handles (watch_scope=object: a watch per Lease), a "
          f"candidate in every 10th; event latency = a write returning here -> the child's listener call")
    print("| design | threads | RSS MiB | latency p50 ms | p99 ms | max ms | changes | ready after s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory(prefix="bench-handles-") as tmp:
        old = _tree_at(before, pathlib.Path(tmp)) if before else None
        runs: list[tuple[str, pathlib.Path | None]] = [("after (one watch thread)", None)]
        if old is not None:
            runs.insert(0, (f"before ({before}: a thread per watch)", old))
        for label, path in runs:
            _client_run(server, ns, label.split(" ")[0], handles, 10, path)
            print(f"  ({label}; {load()})", flush=True)


# -- memory: what one handle costs, as the operator's mirrors hold them ---------------------------
def bench_memory(server: RealApiServer, count: int) -> None:
    """Python memory (tracemalloc) per handle with its listener, on the operator's connect
    options (managed watch scope, no resource binding), over handles with no object behind
    them: the handle's own cost, not the informer cache's."""
    ns = namespace(admin(server), "bench-memory")
    with kubecoord.connect(f"kubernetes://{ns}", kubeconfig=str(server.admin_kubeconfig), watch_scope="managed",
                           bind_resources=False) as coordinator:
        coordinator.leader_election("warm").get_leader()  # the shared informers exist before counting
        coordinator.storage("warm").children("")
        coordinator.group_membership("warm").membership()

        def nothing(*_: Any) -> None: ...

        def election(i: int) -> object:
            handle = coordinator.leader_election(f"e{i}")
            handle.add_listener(nothing)
            handle.get_leader()
            return handle

        def group(i: int) -> object:
            handle = coordinator.group_membership(f"g{i}")
            handle.add_listener(nothing)
            handle.membership()
            return handle

        def store(i: int) -> object:
            storage, registry = coordinator.storage(f"s{i}"), coordinator.listener_registry(f"s{i}")
            storage.children("")
            registry.add_key_set_change_listener("", nothing)
            return storage, registry

        # What the operator holds per resource instead since status comes from the caches
        # (kubecoord.operator.kinds): a mirror with the previous status's counters, no handle.
        # mypy#4717: a Protocol is a fine type[C] here
        cache = require(coordinator, StateCache)  # type: ignore[type-abstract]
        routes = RouteIndex()

        def cached_election(i: int) -> object:
            mirror = CachedLeaderMirror(cache, f"ce{i}", {})
            routes.add(("leaderelections", ns, f"ce{i}"), mirror.routes())
            mirror.snapshot()
            return mirror

        def cached_group(i: int) -> object:
            mirror = CachedGroupMirror(coordinator, cache, {"metadata": {"name": f"cg{i}"}})
            routes.add(("groups", ns, f"cg{i}"), mirror.routes())
            mirror.snapshot()
            return mirror

        def cached_store(i: int) -> object:
            mirror = CachedStoreMirror(cache, f"cs{i}", 1024 * 1024, {})
            routes.add(("kvstores", ns, f"cs{i}"), mirror.routes())
            mirror.snapshot()
            return mirror

        print(f"Python memory per handle ({count} of each, tracemalloc: not RSS, which the allocator decides)")
        tracemalloc.start()
        kept: list[object] = []
        for label, make in (("election + listener", election), ("group membership + listener", group),
                            ("storage + listener registry", store),
                            ("operator's cached election mirror + routes (no handle)", cached_election),
                            ("operator's cached group mirror + routes (no handle)", cached_group),
                            ("operator's cached store mirror + routes (no handle)", cached_store)):
            before = tracemalloc.get_traced_memory()[0]
            kept.extend(make(i) for i in range(count))
            print(f"  {label}: {(tracemalloc.get_traced_memory()[0] - before) / count / 1024:.1f} KiB", flush=True)
        tracemalloc.stop()


# -- operator: 5,000 LeaderElections + 1,000 Groups + 1,000 KVStores --------------------------
class ReadyWatch:
    """Watches the three kinds in every namespace: which are Ready, when status.leader changed."""

    def __init__(self, server: RealApiServer) -> None:
        self.ready: set[tuple[str, str, str]] = set()
        self.leader_seen: dict[tuple[str, str, str | None], float] = {}
        self._cond = threading.Condition()
        self._stopped = threading.Event()
        self._responses: list[urllib3.HTTPResponse] = []
        self._threads = [threading.Thread(target=self._run, args=(server, plural), daemon=True)
                         for plural in ("leaderelections", "groups", "kvstores")]
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        """Stop watching before the server goes: a thread still inside a connect when the
        interpreter finalizes aborts the process (exit 134 after the figures). Each watch's
        socket is shut down, not its response closed: the reading thread holds the
        response's buffer lock while it waits, so a close() waited forever (the bench hung
        after printing its figures)."""
        self._stopped.set()
        with self._cond:
            responses = list(self._responses)
        for response in responses:
            connection = response.connection
            if connection is not None and connection.sock is not None:
                with contextlib.suppress(OSError):
                    connection.sock.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(10)

    def _run(self, server: RealApiServer, plural: str) -> None:
        api = kubernetes.client.CustomObjectsApi(admin(server))
        version = ""
        while not self._stopped.is_set():
            try:
                response = cast(  # _preload_content=False: the client returns the urllib3 response
                    urllib3.HTTPResponse,
                    api.list_cluster_custom_object(
                        GROUP, VERSION, plural, watch=True, resource_version=version, timeout_seconds=300,
                        _preload_content=False,
                    ),
                )
            except Exception:
                self._stopped.wait(0.5)
                continue
            with self._cond:
                self._responses.append(response)
            with contextlib.suppress(Exception):
                for line in response:
                    if self._stopped.is_set():
                        break
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        version = ""
                        break
                    obj = event["object"]
                    version = obj["metadata"].get("resourceVersion", version)
                    status, now = obj.get("status") or {}, time.monotonic()
                    key = (plural, obj["metadata"]["namespace"], obj["metadata"]["name"])
                    with self._cond:
                        self.leader_seen.setdefault((*key[1:], status.get("leader")), now)
                        if any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []):
                            self.ready.add(key)
                        self._cond.notify_all()
            with self._cond:
                self._responses.remove(response)
            response.close()

    def wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 1.0))
        return True


class CpuMeter:
    """CPU seconds of named processes since the meter was made."""

    def __init__(self, pids: dict[str, int]) -> None:
        self._start = {name: (pid, cpu_seconds(pid)) for name, pid in pids.items()}

    def report(self, resources: int) -> str:
        used = {name: cpu_seconds(pid) - start for name, (pid, start) in self._start.items()}
        return "CPU: " + ", ".join(f"{name} {seconds:.1f} s ({seconds / resources * 1000:.1f} ms a resource)"
                                   for name, seconds in used.items())


def print_idle(counter: RequestCounter, label: str, resources: int) -> None:
    """Requests at the server over 30 idle seconds, in all and by verb and resource (the
    server's own clients included: the floor's figure is theirs and kopf's)."""
    before, quiet = counter.by_request(), time.monotonic()
    time.sleep(30)
    requests = counter.by_request() - before
    minutes = (time.monotonic() - quiet) / 60
    per_minute = requests.total() / minutes
    print(f"  {label}: {per_minute:.0f} API requests per minute at the server "
          f"({per_minute / 60 / resources * 1000:.2f}/s per 1,000 resources): "
          + ", ".join(f"{verb} {resource} {n / minutes:.0f}" for (verb, resource), n in requests.most_common()))


def bench_operator(server: RealApiServer, elections: int, groups: int, stores: int, namespaces: int,
                   changes: int, *, floor: bool = False) -> None:
    """``floor``: run bench/floor_operator.py (kopf with handlers that do nothing) instead."""
    api = admin(server)
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        kubernetes.client.ApiextensionsV1Api(api).create_custom_resource_definition(yaml.safe_load(path.read_text()))
    time.sleep(3)  # CRDs established
    spaces = [namespace(api, f"bench-{i}") for i in range(namespaces)]
    namespace(api, "kubecoord-system")
    counter = RequestCounter(server)
    env = {**os.environ, "KUBECONFIG": str(server.admin_kubeconfig), "KUBECOORD_LOG_LEVEL": "WARNING"}
    program = [sys.executable, *(os.environ.get("BENCH_OPERATOR_PROGRAM") or "-m kubecoord.cli").split(), "operator",
               "--all-namespaces", "--lease-namespace",
               "kubecoord-system", "--health-port", "0", "--metrics-port", "0", "--bind", "127.0.0.1"]
    if floor:
        program = [sys.executable, "-m", "kopf", "run", "--standalone", "--all-namespaces", "--quiet",
                   str(ROOT / "bench" / "floor_operator.py")]
    operator = subprocess.Popen(
        program,
        env=env, stdout=subprocess.DEVNULL, stderr=open(server.workdir / "logs" / "operator.log", "w"),  # noqa: SIM115
    )  # fmt: skip
    watch: ReadyWatch | None = None
    try:
        watch = ReadyWatch(server)
        time.sleep(5)
        idle_rss, idle_threads = rss_and_threads(operator.pid)
        print(f"operator idle: RSS {idle_rss:.0f} MiB, {idle_threads} threads")
        custom = kubernetes.client.CustomObjectsApi(api)
        timings = {"leaseDurationSeconds": 6, "renewDeadlineSeconds": 4, "retryPeriodSeconds": 1}
        plan: list[tuple[str, str, str, dict[str, Any]]] = []
        for i in range(elections):
            plan.append(("leaderelections", "LeaderElection", f"le-{i:05d}", timings))
        for i in range(groups):
            plan.append(("groups", "Group", f"grp-{i:04d}", {}))
        for i in range(stores):
            plan.append(("kvstores", "KVStore", f"kv-{i:04d}", {}))

        def create(index: int) -> None:
            plural, kind, name, spec = plan[index]
            body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}, "spec": spec}
            custom.create_namespaced_custom_object(GROUP, VERSION, spaces[index % namespaces], plural, body)

        before = counter.by_request()
        cpu = CpuMeter({"operator" if not floor else "kopf (no-op)": operator.pid, **server.pids,
                        "the bench (its creates and watches)": os.getpid()})
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(create, range(len(plan))))
        created = time.monotonic()
        total = len(plan)
        if floor:
            time.sleep(30)  # kopf has seen every object (nothing to become Ready)
            floor_requests = (counter.by_request() - before).total() - total - 6
            rss, threads = rss_and_threads(operator.pid)
            print(f"floor (kopf, no-op handlers) over {total} resources: RSS {rss:.0f} MiB, {threads} threads, "
                  f"{floor_requests / total:.2f} API requests per resource; {load()}")
            print(f"  {cpu.report(total)} (the creates and 30 s after them)")
            print_idle(counter, "floor idle", total)
            return
        done = watch.wait(lambda: len(watch.ready) >= total, timeout=1800)
        ready_at = time.monotonic()
        requests = counter.by_request() - before
        operator_requests = requests.total() - total - 6  # minus our creates and watch opens
        print(f"created {total} resources in {created - started:.1f} s ({total / (created - started):.0f}/s); "
              f"{'all' if done else len(watch.ready)} Ready {ready_at - created:.1f} s after the last create")
        print(f"  {cpu.report(total)} (the first create to all Ready)")
        print(f"  operator API requests per resource: {operator_requests / total:.1f} ({operator_requests} in all)")
        by_verb: collections.Counter[str] = collections.Counter({"POST": -total})  # minus our creates
        for (verb, _), n in requests.items():
            by_verb[verb] += n
        print("  by verb (per resource): " + ", ".join(f"{verb} {n / total:.2f}" for verb, n in by_verb.items() if n))
        time.sleep(10)
        rss, threads = rss_and_threads(operator.pid)
        print(f"  operator with {total} resources: RSS {rss:.0f} MiB, {threads} threads; {load()}")
        print_idle(counter, "idle", total)

        # Status lag: a client's new leader -> the resource's status shows it.
        lags: list[float] = []
        ns0 = spaces[0]
        names = [plan[i][2] for i in range(0, elections, namespaces)][:changes]
        with kubecoord.connect(f"kubernetes://{ns0}", kubeconfig=str(server.admin_kubeconfig),
                               lease_duration=6.0, renew_deadline=4.0, retry_period=1.0) as coord:
            for index in range(changes):
                name = names[index % len(names)]
                election = coord.leader_election(name)
                candidate = f"c{index}"

                def led(n: str = name, c: str = candidate) -> bool:
                    return (ns0, n, c) in watch.leader_seen

                def vacant(n: str = name) -> bool:
                    return (ns0, n, None) in watch.leader_seen

                if not election.nominate(candidate):
                    election.close()
                    continue
                chosen = time.monotonic()
                watch.wait(led, timeout=60)
                seen = watch.leader_seen.get((ns0, name, candidate))
                if seen is not None:
                    lags.append(max(0.0, seen - chosen))
                election.close()
                watch.wait(vacant, timeout=60)
                with watch._cond:
                    for key in [k for k in watch.leader_seen if k[1] == name and k[0] == ns0]:
                        del watch.leader_seen[key]
        print(f"  status lag, nominate() -> status.leader (over {total} resources): {ms(lags)}")
        rss, threads = rss_and_threads(operator.pid)
        print(f"  operator after the changes: RSS {rss:.0f} MiB, {threads} threads")
        log = (server.workdir / "logs" / "operator.log").read_text(errors="replace")
        lost = log.count("lost the operator lease")
        print(f"  operator HA Lease: {'lost ' + str(lost) + ' times' if lost else 'never lost'}; "
              f"the operator is {'running' if operator.poll() is None else f'gone (exit {operator.poll()})'}; "
              f"{log.count('Traceback')} tracebacks in its log")
    finally:
        if watch is not None:
            watch.close()
        processes.stop(operator, 60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["kv", "client", "operator", "handles", "memory"])
    parser.add_argument("--handles", type=int, default=200)
    parser.add_argument("--count", type=int, default=1000, help="memory: handles of each kind")
    parser.add_argument("--before", default=BEFORE_REV, help="handles: the revision to compare with ('' for none)")
    parser.add_argument("--elections", type=int, default=None)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--stores", type=int, default=None)
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--floor", action="store_true", help="operator: measure kopf with no-op handlers instead")
    args = parser.parse_args()
    print(f"before: {load()}")
    with real_server() as server:
        if server is None:
            return 0
        if args.what == "kv":
            bench_kv(server)
        elif args.what == "handles":
            bench_handles(server, args.handles, args.before or None)
        elif args.what == "memory":
            bench_memory(server, args.count)
        elif args.what == "client":
            bench_client(server, args.elections or 1000, args.stores or 100, min(args.changes, 100))
        else:
            bench_operator(server, args.elections or 5000, args.groups, args.stores or 1000, args.namespaces,
                           args.changes, floor=args.floor)
    print(f"after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
