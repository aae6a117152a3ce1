"""The embedded end-to-end demo behind ``make demo``.

Starts the Kubernetes API emulator (or, with $KUBECONFIG set, uses that cluster),
installs the CRDs from crds/, runs ``kubecoord operator`` as a process, applies the
examples/ resources (with short demo timings), starts three candidate processes and two
group members (kubecoord_testkit.demos.worker), kills the leader with -9 and shows the
failover, lets a member leave, writes to the KV store with listeners attached, prints
the resources with the real ``kubectl get`` along the way (the kubectl beside this
interpreter, which ``make demo`` installs, else the one on PATH; the API server renders
the columns, READY included), and stops everything it started. It says first which API
it uses: the embedded emulator (nothing of yours is touched) or the cluster of
$KUBECONFIG. About 30 seconds on an idle machine.

Deadlines: each step gets 30 s, counted from when what it waits on is up. Starting a
process (Python and the client's imports) takes seconds, and over 30 s on a loaded
machine, so processes get START_BUDGET to come up — a worker says it is up by creating
its ready file once it has nominated or joined, the operator by taking its Lease — and a
process that exits before it is up fails the demo at once.

Guarantee: every process the demo starts is stopped and reaped, and every resource it
created is deleted, also when a step fails; then the operator's log is kept and its end
printed (on success it is deleted with the demo's temporary folder).
"""

from __future__ import annotations

import contextlib
import functools
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import yaml

import kubecoord
from kubecoord.operator import kubeapi
from kubecoord.wire.crd import API_VERSION, PLURALS
from kubecoord_testkit import processes
from kubecoord_testkit.checkout import project_root

DEMO_TIMINGS = {
    "LeaderElection": {"leaseDurationSeconds": 3, "renewDeadlineSeconds": 2, "retryPeriodSeconds": 0.5},
    "Group": {"leaseDurationSeconds": 3, "renewIntervalSeconds": 0.5},
    "KVStore": {},
}
OPERATOR_LEASE = "kubecoord-demo-operator"
START_BUDGET = 180.0
"""Seconds a child process may take to come up (see the module docstring)."""


def _say(text: str) -> None:
    sys.stdout.write(f"[{time.strftime('%H:%M:%S')}] {text}\n")  # one write: listener threads print too
    sys.stdout.flush()


def _wait(
    what: str,
    predicate: Callable[[], bool],
    timeout: float = 30.0,
    *,
    alive: Callable[[], None] = lambda: None,
) -> float:
    """Seconds until ``predicate()`` held; RuntimeError naming ``what`` after ``timeout``.
    ``alive()`` is called on every poll and raises to give up early (a process exited)."""
    started = time.monotonic()
    while not predicate():
        alive()
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"demo: {what} did not happen within {timeout:.0f} s")
        time.sleep(0.05)
    return time.monotonic() - started


# -- kubectl get ------------------------------------------------------------------------
def find_kubectl() -> str:
    """The kubectl beside this interpreter (``make demo`` puts it there), else on PATH."""
    beside = pathlib.Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if found is None:
        raise RuntimeError("demo: no kubectl beside this Python or on PATH: `make demo` installs one into its venv")
    return found


def show(kubectl: list[str], namespace: str, *kinds: str) -> None:
    """``kubectl get KIND`` for each kind, as a user would type it: the API server's Table."""
    for kind in kinds:
        print(f"$ kubectl get {PLURALS[kind]}", flush=True)
        result = subprocess.run([*kubectl, "-n", namespace, "get", PLURALS[kind]], capture_output=True, text=True,
                                timeout=60, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"demo: kubectl get {PLURALS[kind]} failed: {result.stderr.strip()}")
        print(result.stdout, end="", flush=True)


# -- the cluster --------------------------------------------------------------------------
@contextlib.contextmanager
def cluster(workdir: pathlib.Path) -> Iterator[tuple[str, bool]]:
    """(kubeconfig path, embedded?): $KUBECONFIG's cluster, else a fresh API emulator."""
    if os.environ.get("KUBECONFIG"):
        yield os.environ["KUBECONFIG"], False
        return
    from kubecoord_testkit.emulator import ApiEmulator

    # kubectl sends no token over plain HTTP: the emulator, on loopback, takes that as the admin.
    with ApiEmulator(host="127.0.0.1", port=0, anonymous_admin=True) as api:
        yield str(api.write_kubeconfig(workdir / "kubeconfig", namespace="default")), True


def install_crds() -> None:
    for path in sorted((project_root() / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        with contextlib.suppress(kubeapi.ApiException):  # 409: installed already
            kubeapi.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    for path in sorted((project_root() / "crds").glob("*.yaml")):
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        _wait(f"CRD {name} established", functools.partial(_established, name))


def _established(name: str) -> bool:
    crd = kubeapi.call("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def apply_examples(namespace: str) -> list[tuple[str, str]]:
    """Create the examples/ resources (demo timings merged in); returns (kind, name) pairs."""
    created: list[tuple[str, str]] = []
    for file in ("serviceaccounts.yaml", "leaderelection.yaml", "group.yaml", "kvstore.yaml"):
        for doc in yaml.safe_load_all((project_root() / "examples" / file).read_text()):
            doc["metadata"]["namespace"] = namespace
            if doc["kind"] == "ServiceAccount":
                with contextlib.suppress(kubeapi.ApiException):
                    kubeapi.call("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", doc)
                continue
            doc["spec"] = {**doc.get("spec", {}), **DEMO_TIMINGS[doc["kind"]]}
            kubeapi.call("POST", f"/apis/{API_VERSION}/namespaces/{namespace}/{PLURALS[doc['kind']]}", doc)
            created.append((doc["kind"], doc["metadata"]["name"]))
            _say(f"applied examples/{file}: {doc['kind']} {doc['metadata']['name']}")
    return created


def status(namespace: str, kind: str, name: str) -> dict[str, Any]:
    obj = kubeapi.call("GET", f"/apis/{API_VERSION}/namespaces/{namespace}/{PLURALS[kind]}/{name}")
    return dict(obj.get("status") or {})


def _ready(namespace: str, kind: str, name: str) -> bool:
    conditions = status(namespace, kind, name).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _lease_holder(namespace: str, name: str) -> str | None:
    try:
        lease = kubeapi.call("GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")
    except kubeapi.ApiException:
        return None
    return (lease.get("spec") or {}).get("holderIdentity") or None


class Processes:
    """Child processes by name; all stopped and reaped on exit."""

    def __init__(self) -> None:
        self.children: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, command: list[str], **kwargs: Any) -> None:
        self.children[name] = subprocess.Popen(command, **kwargs)

    def check_running(self, *names: str) -> None:
        """RuntimeError if one of ``names`` has exited (it can no longer come up)."""
        for name in names:
            code = self.children[name].poll()
            if code is not None:
                raise RuntimeError(f"demo: {name} exited with status {code} before it was up")

    def signal(self, name: str, signum: int) -> None:
        self.children[name].send_signal(signum)
        self.children[name].wait(timeout=30)

    def stop_all(self) -> None:
        processes.stop_all(self.children.values(), 15)


def _worker(role: str, name: str, identity: str, namespace: str, kubeconfig: str, ready: pathlib.Path) -> list[str]:
    module = "kubecoord_testkit.demos.worker"
    return [sys.executable, "-m", module, role, name, identity, namespace, kubeconfig, str(ready / identity)]


def _where(kubeconfig: str, embedded: bool) -> str:
    server = kubeapi.client().configuration.host
    if embedded:
        return f"the embedded API emulator at {server} (no cluster of yours is touched; set KUBECONFIG to use one)"
    return f"the cluster of $KUBECONFIG ({kubeconfig}), server {server}"


def _keep_log(log: pathlib.Path) -> None:
    """After a failure: the operator's log kept beside the demo's temporary folder, its end printed."""
    if not log.exists():
        return
    kept = pathlib.Path(tempfile.mkdtemp(prefix="kubecoord-demo-failed-")) / "operator.log"
    shutil.copyfile(log, kept)
    lines = kept.read_text(errors="replace").splitlines()
    print(f"demo failed: the operator's log is kept in {kept}; its last {min(len(lines), 40)} lines:", file=sys.stderr)
    for line in lines[-40:]:
        print(f"  {line}", file=sys.stderr)


def run_demo(*, namespace: str = "default", external_operator: bool = False) -> int:
    started = time.monotonic()
    processes = Processes()
    created: list[tuple[str, str]] = []
    kubectl_binary = find_kubectl()  # before anything starts: a missing kubectl is a one-line failure
    with (
        tempfile.TemporaryDirectory(prefix="kubecoord-demo-") as tmp,
        cluster(pathlib.Path(tmp)) as (kubeconfig, embedded),
    ):
        previous = os.environ.get("KUBECONFIG")
        os.environ["KUBECONFIG"] = kubeconfig
        kubeapi.reset()
        kubectl = [kubectl_binary, "--kubeconfig", kubeconfig]
        operator_log = pathlib.Path(tmp) / "operator.log"
        try:
            _say(f"Kubernetes API: {_where(kubeconfig, embedded)}; namespace {namespace}")
            install_crds()
            _say("CRDs installed: leaderelections, groups, kvstores (kubecoord.dev/v1alpha1)")
            if not external_operator:
                log = open(operator_log, "wb")  # noqa: SIM115 - closed with the process
                command = [
                    sys.executable, "-m", "kubecoord.cli", "operator", "--namespace", namespace,
                    "--identity", f"demo-operator-{uuid.uuid4().hex[:6]}", "--lease-namespace", namespace,
                    "--lease-name", OPERATOR_LEASE, "--lease-duration", "4", "--renew-deadline", "3",
                    "--retry-period", "1", "--health-port", "0", "--metrics-port", "0", "--bind", "127.0.0.1",
                ]  # fmt: skip
                if embedded:
                    # The emulator enforces no admission policy, so nothing can confine Group
                    # clients to their own Leases; the operator refuses them namespace-wide Lease
                    # writes unless told this is acceptable. On a real cluster install the chart's
                    # policy instead (docs/operator.md).
                    command.append("--allow-unconfined-group-clients")
                    _say("Group clients unconfined: the emulator enforces no admission policy")
                processes.start("operator", command, stdout=log, stderr=subprocess.STDOUT)
                _wait(
                    "the operator taking its Lease",
                    lambda: _lease_holder(namespace, OPERATOR_LEASE) is not None,
                    START_BUDGET,
                    alive=functools.partial(processes.check_running, "operator"),
                )
                _say(f"operator running (pid {processes.children['operator'].pid}), holding Lease {OPERATOR_LEASE}")
            created = apply_examples(namespace)
            for kind, name in created:
                _wait(f"{kind} {name} Ready", functools.partial(_ready, namespace, kind, name))
            show(kubectl, namespace, "LeaderElection", "Group", "KVStore")

            _say("starting 3 candidates for billing and 2 members of workers (separate processes)")
            ready = pathlib.Path(tmp) / "ready"
            ready.mkdir()
            workers = ("pod-a", "pod-b", "pod-c", "w1", "w2")
            for identity in workers[:3]:
                processes.start(identity, _worker("candidate", "billing", identity, namespace, kubeconfig, ready))
            for identity in workers[3:]:
                processes.start(identity, _worker("member", "workers", identity, namespace, kubeconfig, ready))
            took = _wait(
                "the 5 workers up",
                lambda: all((ready / identity).exists() for identity in workers),
                START_BUDGET,
                alive=functools.partial(processes.check_running, *workers),
            )
            _say(f"5 workers up in {took:.1f} s")
            _wait("a leader", lambda: bool(status(namespace, "LeaderElection", "billing").get("leader")))
            _wait("2 members", lambda: status(namespace, "Group", "workers").get("memberCount") == 2)
            show(kubectl, namespace, "LeaderElection", "Group")

            leader = str(status(namespace, "LeaderElection", "billing")["leader"])
            _say(f"kill -9 {leader} (pid {processes.children[leader].pid}): its Lease must expire first")
            processes.signal(leader, signal.SIGKILL)
            took = _wait(
                "a failover",
                lambda: status(namespace, "LeaderElection", "billing").get("leader") not in (None, leader),
            )
            now = status(namespace, "LeaderElection", "billing")
            _say(f"failover: {now['leader']} leads with epoch {now['epoch']}, {took:.1f} s after the kill")
            show(kubectl, namespace, "LeaderElection")

            _say("w2 leaves the group (SIGTERM: the member closes and deletes its Lease)")
            processes.signal("w2", signal.SIGTERM)
            _wait("w2 gone", lambda: status(namespace, "Group", "workers").get("memberCount") == 1)
            show(kubectl, namespace, "Group")

            _kv_step(namespace, kubeconfig)
            show(kubectl, namespace, "KVStore")
            show_events(namespace)
        except BaseException:
            _cleanup(namespace, created, processes)
            _keep_log(operator_log)
            raise
        else:
            _cleanup(namespace, created, processes)
        finally:
            kubeapi.reset()
            if previous is None:
                os.environ.pop("KUBECONFIG", None)
            else:
                os.environ["KUBECONFIG"] = previous
    _say(f"stopped every process and deleted every resource; demo done in {time.monotonic() - started:.0f} s")
    return 0


def show_events(namespace: str) -> None:
    reasons = ("LeaderElected", "LeaderLost", "MemberJoined", "MemberLeft", "MemberExpired", "SizeLimitExceeded")
    events = kubeapi.call("GET", f"/api/v1/namespaces/{namespace}/events")["items"]
    print("$ kubectl get events  (the operator's)")
    for event in sorted(events, key=lambda e: str(e.get("lastTimestamp") or e["metadata"].get("creationTimestamp"))):
        if event.get("reason") in reasons:
            involved = event["involvedObject"]
            print(f"  {involved['kind']}/{involved['name']}: {event['reason']}: {event['message']}", flush=True)


def _kv_step(namespace: str, kubeconfig: str) -> None:
    _say("KV store topics: a value listener on topics/orders and a key-set listener on topics")
    heard = threading.Event()
    with kubecoord.connect(f"kubernetes://{namespace}", kubeconfig=kubeconfig) as coordinator:
        registry = coordinator.listener_registry("topics")

        def on_value(value: str | None) -> None:
            _say(f"  listener: topics/orders = {value!r}")
            if value == "partitions=6":
                heard.set()

        registry.add_value_change_listener("topics/orders", on_value)
        registry.add_key_set_change_listener("topics", lambda names: _say(f"  listener: topics/* = {sorted(names)}"))
        store = coordinator.storage("topics")
        store.put("topics/orders", "partitions=3")
        version = store.update("topics/orders", "partitions=6", expected_version=1)
        _say(f"topics/orders updated to version {version}")
        heard.wait(10)
        _wait("the KVStore status", lambda: status(namespace, "KVStore", "topics").get("keys") == 1)


def _cleanup(namespace: str, created: list[tuple[str, str]], processes: Processes) -> None:
    """Stop the workers, delete the resources while the operator runs its finalizers, stop it."""
    operator = processes.children.pop("operator", None)
    processes.stop_all()
    if created:
        _say("deleting the resources (the operator's finalizers clean up their backend state)")
    for kind, name in created:
        with contextlib.suppress(kubeapi.ApiException):
            kubeapi.call("DELETE", f"/apis/{API_VERSION}/namespaces/{namespace}/{PLURALS[kind]}/{name}")
    if operator is not None:
        with contextlib.suppress(RuntimeError):
            _wait("finalizers", lambda: not any(_exists(namespace, kind, name) for kind, name in created), timeout=20)
        _say("stopping the operator (SIGTERM)")
        processes.children["operator"] = operator
        processes.stop_all()


def _exists(namespace: str, kind: str, name: str) -> bool:
    try:
        kubeapi.call("GET", f"/apis/{API_VERSION}/namespaces/{namespace}/{PLURALS[kind]}/{name}")
    except kubeapi.ApiException:
        return False
    return True
