"""Multi-process failure tests: each client a real process with its own coordinator and its
own service-account token; the API emulator runs in the test process and attributes every
request to the process that made it. Lease 2 s, renew deadline 1.5 s, retry 0.5 s."""

from __future__ import annotations

import itertools
import json
import pathlib
import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from kubecoord.testing import ApiEmulator

from .processes import Child, Children

pytestmark = pytest.mark.slow

LEASE_DURATION = 2.0
WRITES = ("create", "update", "patch", "delete")


@pytest.fixture(scope="module")
def client_role(admin_api: k8s.ApiClient) -> Iterator[None]:
    """While this module runs, every service account of "default" may use Leases and
    ConfigMaps there (removed afterwards: other folders test denials in "default")."""
    rbac = k8s.RbacAuthorizationV1Api(admin_api)
    role = f"kubecoord-client-{uuid.uuid4().hex[:6]}"
    rbac.create_namespaced_role("default", {"metadata": {"name": role}, "rules": [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]},
    ]})
    rbac.create_namespaced_role_binding("default", {
        "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
        "subjects": [{"kind": "Group", "name": "system:serviceaccounts:default",
                      "apiGroup": "rbac.authorization.k8s.io"}],
    })
    yield
    rbac.delete_namespaced_role_binding(role, "default")
    rbac.delete_namespaced_role(role, "default")


@pytest.fixture
def children(api_emulator: ApiEmulator, tmp_path: pathlib.Path, client_role: None) -> Iterator[Children]:
    started = Children(api_emulator, tmp_path)
    yield started
    started.close()


def _holder(api: ApiEmulator, service: str) -> tuple[str, int] | None:
    for lease in api.objects("leases", "default"):
        if lease["metadata"]["name"] == service:
            spec = lease.get("spec") or {}
            return spec.get("holderIdentity") or "", int(spec.get("leaseTransitions") or 0)
    return None


def _wait_leader(api: ApiEmulator, service: str, candidates: list[Child], *, other_than: str | None = None,
                 timeout: float = 30) -> Child:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        held = _holder(api, service)
        for child in candidates:
            if held and held[0] == child.name != other_than and child.leading():
                return child
        time.sleep(0.02)
    raise AssertionError(f"no leader other than {other_than!r}; lease: {_holder(api, service)}")


def _terms(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One dict per leadership term: member, epoch, acquired ts, last valid_until (holder's view)."""
    terms: list[dict[str, Any]] = []
    for event in history:
        if event["event"] == "acquired":
            terms.append({"member": event["member"], "epoch": event["epoch"], "start": event["ts"],
                          "valid_until": event["valid_until"]})
        elif event["event"] == "renewed" and terms and terms[-1]["member"] == event["member"]:
            terms[-1]["valid_until"] = event["valid_until"]
    return terms


def test_single_leader_and_increasing_epochs_across_20_kill_9_failovers(
    api_emulator: ApiEmulator, children: Children, tmp_path: pathlib.Path
) -> None:
    service = f"kill-{uuid.uuid4().hex[:8]}"
    serial = iter(range(1000))

    def spawn() -> Child:
        name = f"p{next(serial)}-{uuid.uuid4().hex[:4]}"
        return children.start(name, "elect", service, name, str(tmp_path / f"{name}.jsonl"))

    live = [spawn() for _ in range(3)]
    leader = _wait_leader(api_emulator, service, live)
    for _ in range(20):
        leader.kill()
        live.remove(leader)
        live.append(spawn())
        leader = _wait_leader(api_emulator, service, live, other_than=leader.name)

    # The safety rule from every process's own point of view: leadership intervals
    # (is_leader() True until it turned False or the process was killed) never overlap.
    intervals = []
    for child in children:
        start = None
        for line in child.lines:
            if line["event"] == "is_leader" and line["value"] and start is None:
                start = line["t"]
            elif line["event"] == "is_leader" and not line["value"] and start is not None:
                intervals.append((start, line["t"], child.name))
                start = None
        if start is not None:
            intervals.append((start, child.killed_at or time.time(), child.name))
    intervals.sort()
    assert len(intervals) >= 21
    for (_, end, who), (start, _, next_who) in itertools.pairwise(intervals):
        assert start >= end, f"{next_who} led from {start} while {who} led until {end}"

    # The same from the event logs: each term starts after the previous holder's own
    # valid_until, and epochs strictly increase.
    history = [json.loads(line) for path in tmp_path.glob("*.jsonl") for line in path.read_text().splitlines()]
    terms = sorted(_terms(sorted(history, key=lambda e: (e["ts"], e["seq"]))), key=lambda t: t["start"])
    assert len(terms) >= 19  # a process killed right after acquiring may not have flushed its log
    epochs = [term["epoch"] for term in terms]
    assert epochs == sorted(set(epochs)), epochs
    for previous, current in itertools.pairwise(terms):
        assert current["start"] >= previous["valid_until"], (previous, current)


def test_a_paused_leader_knows_it_lost_before_writing_anything(
    api_emulator: ApiEmulator, children: Children, tmp_path: pathlib.Path
) -> None:
    service = f"stop-{uuid.uuid4().hex[:8]}"
    live = [children.start(f"s{i}", "elect", service, f"s{i}", str(tmp_path / f"s{i}.jsonl")) for i in range(3)]
    paused = _wait_leader(api_emulator, service, live)
    held = _holder(api_emulator, service)
    assert held is not None
    paused_epoch = held[1]
    paused.signal(signal.SIGSTOP)
    stopped_at = time.monotonic()
    successor = _wait_leader(api_emulator, service, [c for c in live if c is not paused])
    time.sleep(max(0.0, LEASE_DURATION + 0.5 - (time.monotonic() - stopped_at)))

    api_emulator.reset_requests()
    mark = len(paused.lines)
    paused.signal(signal.SIGCONT)
    first_flag = paused.wait_for(lambda line: line["event"] == "is_leader", start=mark, timeout=10)
    paused.wait_for(lambda line: line["event"] == "leader", start=mark, timeout=10)
    time.sleep(1.0)  # let it run a while: renewal period twice over

    after = paused.lines[mark:]
    assert paused.lines[first_flag]["value"] is False
    assert not any(line["event"] == "is_leader" and line["value"] for line in after)
    first_report = next(line for line in after if line["event"] == "leader")
    assert first_report["value"] != paused.name
    user = f"system:serviceaccount:default:{paused.name}"
    assert [r for r in api_emulator.requests if r.user == user and r.verb in WRITES] == []
    held = _holder(api_emulator, service)
    assert held is not None and held[0] == successor.name and held[1] > paused_epoch


def test_four_processes_of_versioned_writers_lose_no_update(
    api_emulator: ApiEmulator, children: Children, kubeconfig_path: pathlib.Path
) -> None:
    import kubecoord

    store, rounds = f"cas-{uuid.uuid4().hex[:8]}", 25
    with kubecoord.connect("kubernetes://default", kubeconfig=str(kubeconfig_path)) as coordinator:
        coordinator.storage(store).put("counter", "0")
        writers = [children.start(f"w{i}-{store}", "write", store, f"w{i}", str(rounds)) for i in range(4)]
        for writer in writers:
            writer.wait_for(lambda line: line["event"] == "done", timeout=120)
        kv = kubecoord.connect("kubernetes://default", kubeconfig=str(kubeconfig_path)).storage(store)
        counter = kv.fetch_versioned("counter").result()
        assert counter is not None
        assert (counter.value, counter.version) == (str(4 * rounds), 4 * rounds + 1)
        for i in range(4):
            own = kv.fetch_versioned(f"own/w{i}").result()
            assert own is not None and (own.value, own.version) == (str(rounds), rounds + 1)
        kv.close()
