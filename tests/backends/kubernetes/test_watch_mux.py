"""The watch multiplexer (backends/kubernetes/watch_mux.py): every watch of a process is read
on one thread, on the API emulator and on the real kube-apiserver.

- A client holding 200 election handles in the default (per-object) scope, as RBAC granted
  by name requires, runs in <= 12 threads (it ran ~216: a thread per watch) and still sees
  every Lease change.
- One held connection (a fault proxy that stops forwarding) does not delay the events of
  the other streams read by the same thread; the held stream is re-opened once silent.
- A watch cut mid-stream resumes from its last resourceVersion (no re-list); a watch told
  410 re-lists; neither loses nor repeats a change.
"""

from __future__ import annotations

import os
import pathlib
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import yaml
from kubernetes import client as k8s

import kubecoord
from kubecoord.backends.kubernetes.watch_mux import THREAD_NAME, multiplexer
from kubecoord.wire import object_names
from kubecoord_testkit.emulator import ApiEmulator
from kubecoord_testkit.faults import ThreadedFaultProxy
from tests.helpers import Recorder, eventually

from .clusters import Cluster
from .conftest import FAST, Connect
from .processes import Children

HANDLES = 200
THREAD_BUDGET = 12
START_BUDGET = 240.0
"""Seconds the child may take to open 200 handles (each lists its Lease once) on a loaded machine."""


def _by_name_role(cluster: Cluster, service_account: str, leases: list[str]) -> None:
    """RBAC granted by name: get/list/watch/update on exactly ``leases`` (and create, which
    resourceNames cannot narrow), as the operator grants a LeaderElection's clients."""
    rbac = k8s.RbacAuthorizationV1Api(cluster.admin_api)
    rbac.create_namespaced_role(cluster.namespace, {"metadata": {"name": service_account}, "rules": [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": leases,
         "verbs": ["get", "list", "watch", "update"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["kubecoord.dev"], "resources": ["*"], "verbs": ["get"]},
    ]})
    rbac.create_namespaced_role_binding(cluster.namespace, {
        "metadata": {"name": service_account},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": service_account},
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": cluster.namespace}],
    })


@pytest.fixture
def children(cluster: Cluster, tmp_path: pathlib.Path) -> Iterator[Children]:
    started = Children(cluster, tmp_path)
    yield started
    started.close()


@pytest.mark.slow
def test_a_client_with_200_election_handles_by_name_runs_in_few_threads(
    cluster: Cluster, children: Children
) -> None:
    prefix = f"mux-{uuid.uuid4().hex[:6]}"
    services = [f"{prefix}-{i}" for i in range(HANDLES)]
    account = f"sa-{prefix}"
    leases = [object_names.election_lease_name(s) for s in services]
    # Each election's epoch mark is a Lease of its own, granted by name beside it.
    _by_name_role(cluster, account, [*leases, *map(object_names.epoch_lease_name, leases)])
    # The default timings (client-go's: renew every 2 s), so the 20 leaders' renewals, each a
    # blocking request on a lease-loop worker, keep one or two workers busy, not twenty.
    env = {**os.environ, "KUBECOORD_TIMINGS": "15,10,2"}
    child = children.start(account, "handles", prefix, str(HANDLES), "10", env=env)
    child.wait_for(lambda line: line["event"] == "ready", timeout=START_BUDGET)
    settled = child.lines[child.wait_for(lambda line: line["event"] == "settled", timeout=60)]
    # Every thread of the process (/proc), not a timing: main, the watch thread, the
    # dispatcher, the lease loops' workers (one, more while steps are overdue) — not one per
    # watch. Counted once the start-up burst's extra step workers have ended (child.py).
    assert settled["threads"] <= THREAD_BUDGET, settled["names"]
    assert settled["names"].count(THREAD_NAME) == 1, settled["names"]

    # The 200 watches are live: an election nobody in the child runs for (index 5) changes
    # hands in another process, and the child's handle reports the new leader.
    with kubecoord.connect(cluster.url, kubeconfig=str(cluster.admin_kubeconfig), **FAST) as other:
        for index in (5, 123, 199):
            assert other.leader_election(services[index]).nominate("elsewhere")
        for index in (5, 123, 199):
            child.wait_for(lambda line, i=index: line["event"] == "leader" and line["index"] == i
                           and line["value"] == "elsewhere", timeout=30)


def _proxied(kubeconfig: pathlib.Path, proxy: ThreadedFaultProxy, directory: pathlib.Path) -> str:
    """A copy of ``kubeconfig`` whose server is reached through ``proxy`` (TLS passes through)."""
    document = yaml.safe_load(kubeconfig.read_text())
    server = document["clusters"][0]["cluster"]["server"]
    scheme = server.partition("://")[0]
    document["clusters"][0]["cluster"]["server"] = f"{scheme}://{proxy.address}"
    path = directory / f"proxied-{uuid.uuid4().hex[:6]}"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def _upstream(kubeconfig: pathlib.Path) -> tuple[str, int]:
    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    host, _, port = server.partition("://")[2].rstrip("/").rpartition(":")
    return host, int(port)


def test_a_held_stream_never_delays_the_others(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    prefix = f"held-{uuid.uuid4().hex[:6]}"
    url, admin = cluster.url, str(cluster.admin_kubeconfig)
    with ThreadedFaultProxy(_upstream(cluster.admin_kubeconfig)) as proxy, \
            kubecoord.connect(url, kubeconfig=_proxied(cluster.admin_kubeconfig, proxy, tmp_path), **FAST) as held, \
            kubecoord.connect(url, kubeconfig=admin, **FAST) as watcher, \
            kubecoord.connect(url, kubeconfig=admin, **FAST) as writer:
        stuck: Recorder[str | None] = Recorder()
        held_election = held.leader_election(f"{prefix}-stuck")
        held_election.add_listener(stuck)
        held_election.get_leader()
        seen = [Recorder[str | None]() for _ in range(20)]
        for i, recorder in enumerate(seen):
            election = watcher.leader_election(f"{prefix}-{i}")
            election.add_listener(recorder)
            election.get_leader()
        assert multiplexer.streams >= 21  # the held stream and the 20 others share the one thread
        proxy.hold()  # the held coordinator's watch (and requests) stall: no error, no reset
        time.sleep(0.5)
        for i in range(20):
            assert writer.leader_election(f"{prefix}-{i}").nominate(f"w{i}")
        for i, recorder in enumerate(seen):
            recorder.wait_last(f"w{i}", timeout=10)
        assert writer.leader_election(f"{prefix}-stuck").nominate("late")
        time.sleep(1.0)
        assert "late" not in stuck.calls  # the proxy really holds that stream
        proxy.release()
        stuck.wait_last("late", timeout=15)


def test_a_stream_cut_mid_way_resumes_and_a_410_relists(
    api_emulator: ApiEmulator, connect: Connect, tmp_path: pathlib.Path, kubeconfig_path: pathlib.Path, name: str
) -> None:
    with ThreadedFaultProxy(_upstream(kubeconfig_path)) as proxy:
        observer = connect(kubeconfig=_proxied(kubeconfig_path, proxy, tmp_path))
        writer = connect()
        registry = observer.listener_registry(name)
        seen: Recorder[str | None] = Recorder()
        registry.add_value_change_listener("k", seen)
        kv = writer.storage(name)
        kv.put("k", "1")
        seen.wait_last("1")
        selector = f"metadata.name={object_names.store_configmap_name(name)}"

        def lists() -> int:
            return sum(1 for r in api_emulator.requests
                       if r.verb == "list" and r.resource == "configmaps" and r.query.get("fieldSelector") == selector)

        def watches() -> list[str]:
            return [r.query.get("resourceVersion", "") for r in api_emulator.requests
                    if r.watch and r.resource == "configmaps" and r.query.get("fieldSelector") == selector]

        listed, watched = lists(), len(watches())
        # Cut mid-stream: every connection of the observer is reset (RST).
        assert proxy.cut() >= 1
        kv.update("k", "2")
        seen.wait_last("2", timeout=15)
        eventually(lambda: len(watches()) > watched)
        assert all(watches()[watched:])  # re-opened from a resourceVersion ...
        assert lists() == listed  # ... without a re-list
        # 410: the stream's version compacted away, then the server ends the watch.
        connect().storage(f"{name}-other").put("x", "y")
        api_emulator.compact()
        api_emulator.break_watches()
        eventually(lambda: lists() > listed)
        kv.update("k", "3")
        seen.wait_last("3", timeout=15)
        time.sleep(0.5)
        assert seen.calls == ["1", "2", "3"]  # nothing lost, nothing delivered twice
    assert sum(1 for t in threading.enumerate() if t.name == THREAD_NAME) <= 1
