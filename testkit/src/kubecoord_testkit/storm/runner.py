"""The two-replica operator storm on a whole cluster, as the chart installs the operator.

    from kubecoord_testkit.storm.runner import StormOptions, run
    report = run(StormOptions(seconds=60, seed=1), workdir)
    print(report.render()); assert report.ok

What it does:

1. A whole cluster (kubecoord_testkit.servers.kubernetes, ``cluster=True``) whose audit
   log records every write and the operator Lease's bodies (storm.judging).
2. The chart's ServiceAccount, RBAC, Group-client confinement policy, operator-writes policy
   and — fenced, the default — term policy, rendered by ``helm template`` for release namespace
   ``storm-system`` watching namespace ``storm``, applied; the CRDs of this checkout.
3. Two replicas (storm.replicas), each behind its own fault proxy; the driver reaches the
   server through a third proxy that is never faulted.
4. Traffic: creates, ``spec.clients`` updates and deletes of LeaderElections, Groups and
   KVStores over a small pool of names (re-created names included), one every
   ``op_interval`` seconds, seeded.
5. Faults, one every ``fault_every`` seconds, in the order of ``faults``, each on the
   replica that holds the operator Lease: ``kill`` (-9), ``freeze`` (SIGSTOP until the
   other replica holds the Lease, then SIGCONT), ``hold`` (its proxy stalls its
   connections both ways until the other holds the Lease, then delivers them),
   ``send-freeze`` (it freezes itself after its fencing check passed a write and before
   the send — kubecoord_testkit.operator_freeze — until the successor has written,
   then SIGCONT: the write goes out in the old term — or, as often, the resumed replica
   cancels it first), ``replay`` (it is killed -9, and once its successor has written the
   driver sends one write exactly as the deposed replica would have: its token, its user
   agent, its term — a frozen request that certainly arrives), ``restart``
   (kube-apiserver killed -9 and started again, the controller manager and scheduler with
   it). A replica that
   exits (deposed, killed) is started again as a new generation, as its Deployment
   would.
6. The end: traffic stops, faults heal, both replicas run; within ``settle`` seconds every
   resource must be Ready, the namespace's kubecoord RoleBindings must be exactly those
   the specs imply, binding exactly ``spec.clients``, and every backing object present and
   owned by its resource's uid. Then the audit log is judged (storm.judging).

Not covered: Groups whose assignment the operator leads (their coordinator's writes go
through a backend handle with no term, by design); more than one API server.
"""

from __future__ import annotations

import json
import pathlib
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from kubecoord.operator import fencing
from kubecoord.operator import term as operator_term
from kubecoord.wire import object_names
from kubecoord.wire.group_record import derived_name
from kubecoord_testkit.checkout import project_root
from kubecoord_testkit.faults.proxy import ThreadedFaultProxy
from kubecoord_testkit.servers.kubernetes import RealApiServer, find_binaries
from kubecoord_testkit.storm import judging
from kubecoord_testkit.storm.replicas import Replica, ReplicaConfig

GROUP, VERSION = "kubecoord.dev", "v1alpha1"
KINDS = {"LeaderElection": "leaderelections", "Group": "groups", "KVStore": "kvstores"}
PREFIX = {"LeaderElection": "le", "Group": "g", "KVStore": "kv"}
RELEASE = "storm"
RELEASE_NAMESPACE = "storm-system"
NAMESPACE = "storm"
LEASE = "kubecoord-operator"
ACCOUNT = f"{RELEASE}-kubecoord"
CLIENTS = ("c0", "c1", "c2", "c3")
FAULTS = ("kill", "freeze", "hold", "send-freeze", "replay", "restart")
TEMPLATES = ("templates/serviceaccount.yaml", "templates/rbac.yaml", "templates/admissionpolicy.yaml",
             "templates/operatorpolicy.yaml", "templates/termpolicy.yaml")
TERM_POLICY = "templates/termpolicy.yaml"


@dataclass(frozen=True)
class StormOptions:
    seconds: float = 60.0
    """How long the traffic and the faults run (the settling and judging come after)."""
    seed: int = 1
    names: int = 3
    """Names per kind in the traffic's pool."""
    fenced: bool = True
    faults: tuple[str, ...] = ("kill", "freeze", "hold", "send-freeze")
    fault_every: float = 12.0
    op_interval: float = 0.25
    timings: tuple[float, float, float] = (6.0, 4.0, 0.5)
    """The operator Lease's duration, renew deadline, retry period (writes may take 2 s) on a
    machine whose API writes are quick; scaled up with the measured write latency
    (``scaled_timings``)."""
    settle: float = 180.0
    """Seconds the end state may take, scaled by the same factor as the timings."""
    helm: pathlib.Path | None = None
    keep: bool = False
    """Leave the cluster's folder (logs, audit log) in place."""
    min_faults: int = 0
    """The storm goes on past ``seconds`` until this many faults were made."""
    until_violation: bool = False
    """End the storm at the first fault after which the audit log shows a violation (a
    fail-first run: the judge catches what an unfenced run lets through)."""


@dataclass
class Report:
    options: StormOptions
    operations: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    verdict: judging.Verdict = field(default_factory=judging.Verdict)
    problems: list[str] = field(default_factory=list)
    """What the end state lacks (empty: converged)."""
    notes: list[str] = field(default_factory=list)
    settled_after: float | None = None
    write_ms: tuple[float, float] = (0.0, 0.0)
    """Server time per applied operator write, p50 and p99 (audit received -> answered)."""
    seconds: float = 0.0
    workdir: pathlib.Path | None = None
    timings: tuple[float, float, float] | None = None
    """The operator Lease's timings as run (``scaled_timings``)."""
    write_probe_s: float = 0.0
    """The driver's write round trip before the storm, p90 of WRITE_PROBES, seconds."""

    @property
    def ok(self) -> bool:
        return self.verdict.ok and not self.problems

    def figures(self) -> dict[str, Any]:
        verdict = self.verdict
        return {
            "fenced": self.options.fenced, "seed": self.options.seed, "storm_seconds": self.options.seconds,
            "total_seconds": round(self.seconds, 1), "operations": dict(self.operations),
            "faults": dict(self.faults), "writes_checked": verdict.checked, "in_term": verdict.in_term,
            "takeovers": verdict.takeovers, "freezes": self.faults["freeze"] + self.faults["send-freeze"],
            "held_connections": self.faults["hold"], "kills": self.faults["kill"],
            "apiserver_restarts": self.faults["restart"],
            "late_refused_403": sum(1 for w in verdict.refused_late if w.code == 403),
            "late_unanswered": sum(1 for w in verdict.refused_late if w.code != 403),
            "applied_in_window": len(verdict.window),
            "violations": len(verdict.violations), "term_mismatches": len(verdict.term_mismatches),
            "unattributable_writes": len(verdict.unattributable),
            "unrecorded_lease_writes": verdict.unrecorded_lease_writes,
            "unattributed_writes": verdict.unattributed, "end_state_problems": len(self.problems),
            "settled_after_s": None if self.settled_after is None else round(self.settled_after, 1),
            "server_ms_per_write_p50": round(self.write_ms[0], 2),
            "server_ms_per_write_p99": round(self.write_ms[1], 2),
            "write_probe_p90_s": round(self.write_probe_s, 3),
            "lease_timings_s": list(self.timings or self.options.timings),
        }

    def render(self) -> str:
        lines = [f"{key}: {value}" for key, value in self.figures().items()]
        for title, writes in (("violation", self.verdict.violations), ("term mismatch", self.verdict.term_mismatches),
                              ("unattributable", self.verdict.unattributable),
                              ("applied in the window", self.verdict.window),
                              ("late, not applied", self.verdict.refused_late)):
            lines += [f"{title}: {w.describe(self.verdict.origin)}" for w in writes[:20]]
        lines += [f"end state: {problem}" for problem in self.problems[:40]]
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)


class _Admin:
    def __init__(self, kubeconfig: pathlib.Path) -> None:
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
        configuration.retries = 3
        self.api = k8s.ApiClient(configuration)
        self.core = k8s.CoreV1Api(self.api)
        self.custom = k8s.CustomObjectsApi(self.api)
        self.leases = k8s.CoordinationV1Api(self.api)
        self.rbac = k8s.RbacAuthorizationV1Api(self.api)

    def holder(self) -> str:
        try:
            spec = self.leases.read_namespaced_lease(LEASE, RELEASE_NAMESPACE).spec
            return str(spec.holder_identity or "") if spec is not None else ""
        except Exception:
            return ""

    def resources(self, kind: str) -> list[dict[str, Any]]:
        listed: Any = self.custom.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, KINDS[kind])
        return list(listed.get("items") or [])


def _render(helm: pathlib.Path, fenced: bool) -> list[dict[str, Any]]:
    shown = [arg for template in TEMPLATES if fenced or template != TERM_POLICY for arg in ("--show-only", template)]
    done = subprocess.run([str(helm), "template", RELEASE, str(project_root() / "charts" / "kubecoord"),
                           "--namespace", RELEASE_NAMESPACE, "--kube-version", "1.32.0",
                           "--set", "operator.allNamespaces=false", "--set", f"operator.namespaces={{{NAMESPACE}}}",
                           "--set", f"rbac.fenceOperatorWrites={'true' if fenced else 'false'}", *shown],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"helm template failed: {done.stderr}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def _find_helm(given: pathlib.Path | None) -> pathlib.Path:
    candidates = [given] if given else [pathlib.Path(sys.executable).parent / "helm",
                                        project_root() / ".venv" / "bin" / "helm"]
    found = shutil.which("helm")
    if not given and found:
        candidates.append(pathlib.Path(found))
    for candidate in candidates:
        if candidate is not None and candidate.exists():
            return candidate
    raise RuntimeError(f"no helm at {', '.join(map(str, candidates))} (make helm)")


def _install(admin: _Admin, documents: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    """CRDs, namespaces, client ServiceAccounts and the chart's objects; returns the Group
    confinement policy's name and its binding's."""
    extensions = k8s.ApiextensionsV1Api(admin.api)
    for path in sorted((project_root() / "crds").glob("*.yaml")):
        extensions.create_custom_resource_definition(yaml.safe_load(path.read_text()))
    for namespace in (RELEASE_NAMESPACE, NAMESPACE):
        admin.core.create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]
    for client in CLIENTS:
        admin.core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": client}})  # type: ignore[arg-type]
    dynamic = DynamicClient(admin.api)  # type: ignore[no-untyped-call]
    policy = binding = None
    for document in documents:
        resource = dynamic.resources.get(api_version=document["apiVersion"], kind=document["kind"])
        where: str | None = document["metadata"].get("namespace") or (
            RELEASE_NAMESPACE if resource.namespaced else None)
        resource.create(body=document, namespace=where)
        if document["kind"] == "ValidatingAdmissionPolicy" and \
                (document["spec"].get("paramKind") or {}).get("kind") == "ConfigMap":
            policy = str(document["metadata"]["name"])
    for document in documents:
        if document["kind"] == "ValidatingAdmissionPolicyBinding" and document["spec"].get("policyName") == policy:
            binding = str(document["metadata"]["name"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            for kind in KINDS:
                admin.resources(kind)
            break
        except ApiException:
            time.sleep(0.3)
    return policy, binding


def _token_kubeconfig(server: RealApiServer, admin: _Admin, folder: pathlib.Path, replica: Replica) -> pathlib.Path:
    token: Any = admin.core.create_namespaced_service_account_token(
        ACCOUNT, RELEASE_NAMESPACE, {"spec": {"audiences": [], "expirationSeconds": 7200}})  # type: ignore[arg-type]
    path = server.token_kubeconfig(folder / f"kubeconfig-{replica.slot}-{replica.generation + 1}",
                                   str(token.status.token), namespace=RELEASE_NAMESPACE)
    path.write_text(path.read_text().replace(server.url, f"https://127.0.0.1:{replica.proxy.port}"))
    return path


class _Traffic(threading.Thread):
    def __init__(self, admin: _Admin, options: StormOptions, report: Report) -> None:
        super().__init__(daemon=True, name="storm-traffic")
        self.admin, self.options, self.report = admin, options, report
        self.random = random.Random(options.seed)
        self.halt = threading.Event()

    def run(self) -> None:
        names = [(kind, f"{PREFIX[kind]}-{i}") for kind in KINDS for i in range(self.options.names)]
        while not self.halt.wait(self.options.op_interval):
            kind, name = self.random.choice(names)
            clients = sorted(self.random.sample(CLIENTS, self.random.randint(0, 2)))
            try:
                self._one(kind, name, clients)
            except ApiException as error:
                self.report.operations[f"refused {error.status}"] += 1
            except Exception as error:
                self.report.operations[f"failed {type(error).__name__}"] += 1

    def _one(self, kind: str, name: str, clients: list[str]) -> None:
        custom, plural = self.admin.custom, KINDS[kind]
        try:
            custom.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, plural, name)
        except ApiException as error:
            if error.status != 404:
                raise
            body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name},
                    "spec": {"clients": clients}}
            custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, plural, body)
            self.report.operations["create"] += 1
            return
        if self.random.random() < 0.25:
            custom.delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, plural, name)
            self.report.operations["delete"] += 1
        else:
            custom.patch_namespaced_custom_object(GROUP, VERSION, NAMESPACE, plural, name,
                                                  {"spec": {"clients": clients}})
            self.report.operations["update"] += 1


class _Storm:
    def __init__(self, options: StormOptions, workdir: pathlib.Path, report: Report) -> None:
        self.options, self.workdir, self.report = options, workdir, report
        self.server = RealApiServer(find_binaries(), workdir / "cluster", cluster=True,
                                    audit_rules=(judging.lease_audit_rule(RELEASE_NAMESPACE),))
        self.replicas: list[Replica] = []
        self.timings = options.timings
        """The operator Lease's timings as run (set in ``start``)."""
        self.control: ThreadedFaultProxy | None = None
        self.admin: _Admin | None = None

    # -- setup -------------------------------------------------------------------------
    def start(self) -> None:
        (self.workdir / "cluster").mkdir(parents=True, exist_ok=True)
        self.server.start()
        upstream = ("127.0.0.1", int(self.server.url.rsplit(":", 1)[1]))
        self.control = ThreadedFaultProxy(upstream).start()
        admin_config = self.workdir / "kubeconfig-admin"
        admin_config.write_text(self.server.admin_kubeconfig.read_text().replace(
            self.server.url, f"https://127.0.0.1:{self.control.port}"))
        self.admin = _Admin(admin_config)
        policy, binding = _install(self.admin, _render(_find_helm(self.options.helm), self.options.fenced))
        self.report.write_probe_s = _write_round_trip(self.admin)
        self.timings = scaled_timings(self.options.timings, self.report.write_probe_s)
        self.report.timings = self.timings
        config = ReplicaConfig(NAMESPACE, RELEASE_NAMESPACE, LEASE, self.timings, self.options.fenced, policy,
                               binding)
        replicas = self.workdir / "replicas"
        replicas.mkdir(exist_ok=True)
        self.replicas = [Replica(slot, config, replicas, upstream) for slot in ("a", "b")]
        self._launch(self.replicas[0])
        self._wait(lambda: self.admin is not None and self.admin.holder() == self.replicas[0].identity, 90,
                   "the first replica to lead")
        self._launch(self.replicas[1])

    def _launch(self, replica: Replica) -> None:
        assert self.admin is not None
        replica.start(_token_kubeconfig(self.server, self.admin, self.workdir / "replicas", replica))
        self.report.operations["replica starts"] += 1

    def close(self) -> None:
        errors: list[BaseException] = []
        for closing in [*(r.close for r in self.replicas), *([self.control.close] if self.control else []),
                        self.server.stop]:
            try:
                closing()
            except BaseException as error:
                errors.append(error)
        if errors:
            raise errors[0]

    # -- faults ------------------------------------------------------------------------
    def _wait(self, condition: Callable[[], bool], timeout: float, what: str) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return True
            self._respawn()
            time.sleep(0.2)
        self.report.notes.append(f"waited {timeout:.0f} s for {what} in vain")
        return False

    def _respawn(self) -> None:
        """A replica that exited (deposed, killed) starts again as a new generation."""
        for replica in self.replicas:
            if replica.process is not None and not replica.alive() and not replica.frozen:
                code = replica.process.returncode
                self.report.operations[f"replica exits {code}"] += 1
                if code not in (1, -9) and "Traceback" in replica.log_text():
                    self.report.notes.append(f"{replica.identity} exited {code} with a traceback")
                self._launch(replica)

    def _active(self) -> tuple[Replica, Replica] | None:
        assert self.admin is not None
        holder = self.admin.holder()
        for index, replica in enumerate(self.replicas):
            if replica.identity == holder and replica.alive():
                return replica, self.replicas[1 - index]
        return None

    def _ready_pair(self) -> tuple[Replica, Replica] | None:
        """The active replica and a standby that has been up long enough to take over."""
        self._wait(lambda: self._active() is not None and all(r.alive() for r in self.replicas), 120,
                   "a leader and a standby")
        pair = self._active()
        if pair is not None:
            standby = pair[1]
            self._wait(lambda: "standing by for the operator lease" in standby.log_text(), 60, "the standby")
        return pair

    def _taken_over(self, other: Replica) -> bool:
        assert self.admin is not None
        return self._wait(lambda: self.admin is not None and self.admin.holder() == other.identity,
                          self.timings[0] * 4 + 30, f"{other.identity} to take over")

    def _successor_wrote(self, other: Replica) -> bool:
        return self._wait(lambda: "leading: starting reconciliation" in other.log_text(), 60,
                          f"{other.identity} to lead") and self._wait(
            lambda: _has_written(self.server.audit_log, other.identity), 30, f"{other.identity}'s first write")

    def fault(self, kind: str) -> None:
        if kind == "restart":
            self._restart_apiserver()
            return
        pair = self._ready_pair()
        if pair is None:
            return
        active, other = pair
        # The deposed generation: ``active`` starts a new one as soon as this one exits.
        identity, process, kubeconfig = active.identity, active.process, active.kubeconfig
        if kind == "kill":
            active.kill()
            self._taken_over(other)
        elif kind == "freeze":
            active.freeze()
            self._taken_over(other)
            time.sleep(1.0)
            active.thaw()
        elif kind == "hold":
            active.proxy.hold("both")
            self._taken_over(other)
            time.sleep(1.0)
            active.proxy.release()
        elif kind == "replay":
            term = self._term_of()
            active.kill()
            if self._taken_over(other) and self._successor_wrote(other):
                answer = _replay(kubeconfig, identity, term, self.options.fenced)
                self.report.notes.append(f"replayed write of {identity} ({term}): {answer}")
        elif kind == "send-freeze":
            active.arm.touch()
            frozen = self._wait(lambda: active.mark(identity).exists(), 90, f"{identity} to freeze at a send")
            active.arm.unlink(missing_ok=True)
            if not frozen:
                return
            active.frozen = True
            if self._taken_over(other):
                self._successor_wrote(other)
            active.thaw()
        else:
            raise ValueError(f"unknown fault {kind!r} (one of {', '.join(FAULTS)})")
        self.report.faults[kind] += 1
        if process is not None:
            self._wait(lambda: process.poll() is not None, 60, f"the deposed {identity} to exit")

    def _term_of(self) -> str:
        assert self.admin is not None
        spec = self.admin.leases.read_namespaced_lease(LEASE, RELEASE_NAMESPACE).spec
        assert spec is not None
        return f"{spec.holder_identity}/{spec.lease_transitions or 0}"

    def _restart_apiserver(self) -> None:
        self.server.restart()
        upstream = ("127.0.0.1", int(self.server.url.rsplit(":", 1)[1]))
        assert self.control is not None
        for proxy in (self.control, *(r.proxy for r in self.replicas)):
            proxy.set_upstream(upstream)
        self.report.faults["restart"] += 1
        self._wait(lambda: self._active() is not None, 120, "a leader after the API server's restart")

    # -- the end -----------------------------------------------------------------------
    def heal(self) -> None:
        for replica in self.replicas:
            replica.proxy.heal()
            if replica.frozen:
                replica.thaw()
            replica.arm.unlink(missing_ok=True)
        self._wait(lambda: self._active() is not None and all(r.alive() for r in self.replicas), 120,
                   "a leader and a standby after the storm")

    def judge(self) -> judging.Verdict:
        log = judging.read_audit_file(self.server.audit_log, lease_namespace=RELEASE_NAMESPACE, lease=LEASE,
                                      account=f"system:serviceaccount:{RELEASE_NAMESPACE}:{ACCOUNT}")
        return judging.judge(log, fenced=self.options.fenced)

    def end_state(self) -> list[str]:
        assert self.admin is not None
        try:
            return _end_state(self.admin)
        except Exception as error:
            return [f"reading the end state failed: {error}"]


def _replay(kubeconfig: pathlib.Path, identity: str, term: str, fenced: bool) -> str:
    """One ConfigMap create in the watched namespace as replica ``identity`` sends its writes
    (kubecoord.operator.kubeapi, kubecoord.operator.term); returns the API server's answer."""
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
    client = k8s.ApiClient(configuration)
    client.user_agent = f"{judging.AGENT_PREFIX}{identity}"
    if fenced:
        holder, transitions = term.rsplit("/", 1)
        username = f"system:serviceaccount:{RELEASE_NAMESPACE}:{ACCOUNT}"
        for name, value in operator_term.headers(username, operator_term.Term(holder, int(transitions))).items():
            client.set_default_header(name, value)  # type: ignore[no-untyped-call]
    # Labelled as everything the operator writes is (the chart's operator-writes policy
    # refuses an unlabelled one): only the term can make the API server refuse it.
    body = {"metadata": {"name": f"storm-replay-{identity}",
                         "labels": {object_names.MANAGED_BY_LABEL: object_names.MANAGED_BY}}}
    try:
        k8s.CoreV1Api(client).create_namespaced_config_map(NAMESPACE, body)  # type: ignore[arg-type]
    except ApiException as error:
        try:
            message = str(json.loads(error.body or "{}").get("message") or "")
        except ValueError:
            message = str(error.body)[:200]
        return f"{error.status} {error.reason}: {message}"
    finally:
        client.close()  # type: ignore[no-untyped-call]
    return "201 Created"


def _has_written(audit: pathlib.Path, identity: str) -> bool:
    """Whether the audit log's last 4 MiB hold a write ``identity`` made, as the judge counts them."""
    needle = f'"userAgent":"{judging.AGENT_PREFIX}{identity}"'.encode()
    with open(audit, "rb") as log:
        log.seek(0, 2)
        log.seek(max(0, log.tell() - (4 << 20)))
        for line in log:
            if needle in line and b'"ResponseComplete"' in line:
                try:
                    if judging.operator_write(json.loads(line)) is not None:
                        return True
                except ValueError:  # the first line of the tail, cut
                    continue
    return False


def _name(obj: Any) -> str:
    return str(obj.metadata.name)


def _owned_by(obj: Any, uid: str) -> bool:
    return any(ref.uid == uid for ref in (obj.metadata.owner_references or []))


def _end_state(admin: _Admin) -> list[str]:
    problems: list[str] = []
    leases: dict[str, Any] = {_name(lease): lease for lease in admin.leases.list_namespaced_lease(NAMESPACE).items}
    maps: dict[str, Any] = {_name(cm): cm for cm in admin.core.list_namespaced_config_map(NAMESPACE).items}
    bindings: dict[str, Any] = {_name(b): b for b in admin.rbac.list_namespaced_role_binding(NAMESPACE).items
                                if _name(b).startswith("kubecoord-")}
    expected_bindings: set[str] = set()
    for kind in KINDS:
        for body in admin.resources(kind):
            name, uid = body["metadata"]["name"], body["metadata"]["uid"]
            label = f"{kind} {name}"
            if body["metadata"].get("deletionTimestamp"):
                continue
            conditions = {c["type"]: c for c in (body.get("status") or {}).get("conditions") or []}
            if (conditions.get("Ready") or {}).get("status") != "True":
                problems.append(f"{label} not Ready: {conditions.get('Ready')}")
            clients = sorted(set((body.get("spec") or {}).get("clients") or []))
            binding_name = f"kubecoord-{kind.lower()}-{name}"
            if clients:
                expected_bindings.add(binding_name)
                binding = bindings.get(binding_name)
                bound = sorted(s.name for s in (binding.subjects or [])) if binding is not None else None
                if bound != clients:
                    problems.append(f"{label}: RoleBinding binds {bound}, spec.clients {clients}")
            if kind == "LeaderElection":
                wanted = [("Lease", name), ("Lease", object_names.epoch_lease_name(name))]
            elif kind == "KVStore":
                wanted = [("ConfigMap", object_names.store_shard_name(name, 0))]
            else:
                store = derived_name(name)
                election = object_names.election_lease_name(store)
                wanted = [("Lease", election), ("Lease", object_names.epoch_lease_name(election)),
                          ("ConfigMap", object_names.store_shard_name(store, 0))]
            for what, object_name in wanted:
                found = (leases if what == "Lease" else maps).get(object_name)
                if found is None:
                    problems.append(f"{label}: {what} {object_name} missing")
                elif not _owned_by(found, uid):
                    problems.append(f"{label}: {what} {object_name} not owned by uid {uid}")
    for extra in sorted(set(bindings) - expected_bindings):
        problems.append(f"RoleBinding {extra} binds {[s.name for s in bindings[extra].subjects or []]} "
                        "with no resource whose spec.clients asks for it")
    return problems


def run(options: StormOptions, workdir: pathlib.Path) -> Report:
    """The storm (module docstring); the report has every figure and what failed."""
    unknown = set(options.faults) - set(FAULTS)
    if unknown:
        raise ValueError(f"unknown faults {sorted(unknown)} (one of {', '.join(FAULTS)})")
    started = time.monotonic()
    report = Report(options, workdir=workdir)
    storm = _Storm(options, workdir, report)
    try:
        storm.start()
        assert storm.admin is not None
        traffic = _Traffic(storm.admin, options, report)
        traffic.start()
        end = time.monotonic() + options.seconds
        turn = 0
        while options.faults and (time.monotonic() < end or turn < options.min_faults):
            wait_until = time.monotonic() + options.fault_every
            while time.monotonic() < wait_until:
                storm._respawn()
                time.sleep(0.2)
            if time.monotonic() >= end and turn >= options.min_faults:
                break
            storm.fault(options.faults[turn % len(options.faults)])
            turn += 1
            if options.until_violation and storm.judge().violations:
                break
        if not options.faults:
            time.sleep(max(0.0, end - time.monotonic()))
        traffic.halt.set()
        traffic.join(30)
        storm.heal()
        settling = time.monotonic()
        deadline = settling + options.settle * storm.timings[0] / options.timings[0]
        problems = storm.end_state()
        while problems and time.monotonic() < deadline:
            storm._respawn()
            time.sleep(2.0)
            problems = storm.end_state()
        report.problems = problems
        if not problems:
            report.settled_after = time.monotonic() - settling
        for replica in storm.replicas:
            replica.stop()
        time.sleep(1.0)  # the audit log is written as requests complete
        report.verdict = storm.judge()
        report.write_ms = _server_times(storm.server.audit_log)
    finally:
        storm.close()
        report.seconds = time.monotonic() - started
        (workdir / "report.json").write_text(json.dumps(report.figures(), indent=2) + "\n")
        if not options.keep and report.ok:
            shutil.rmtree(workdir / "cluster", ignore_errors=True)
    return report


WRITE_HEADROOM = 4.0
"""An operator write request may take this many times the measured write round trip."""
WRITE_PROBES = 20


def scaled_timings(timings: tuple[float, float, float], write_round_trip: float) -> tuple[float, float, float]:
    """``timings`` (lease duration, renew deadline, retry period) as given while the write
    timeout they imply (kubecoord.operator.fencing.term_write_timeout) is at least
    WRITE_HEADROOM times ``write_round_trip``, else all three scaled by the factor that
    makes it so: on a loaded machine the operator's writes must not all time out, or
    nothing converges (and neither renewals nor takeovers keep to quick timings)."""
    timeout = fencing.term_write_timeout(timings[0], timings[1])
    factor = max(1.0, WRITE_HEADROOM * write_round_trip / timeout)
    return (round(timings[0] * factor, 2), round(timings[1] * factor, 2), round(timings[2] * factor, 2))


def _write_round_trip(admin: _Admin) -> float:
    """p90 of WRITE_PROBES ConfigMap patches' round trips, in seconds, from this process (run
    at the replicas' priority): what a write takes on this machine now."""
    name = "storm-write-probe"
    admin.core.create_namespaced_config_map(RELEASE_NAMESPACE, {"metadata": {"name": name}})  # type: ignore[arg-type]
    spans = []
    for probe in range(WRITE_PROBES):
        began = time.monotonic()
        admin.core.patch_namespaced_config_map(name, RELEASE_NAMESPACE, {"data": {"probe": str(probe)}})
        spans.append(time.monotonic() - began)
    admin.core.delete_namespaced_config_map(name, RELEASE_NAMESPACE)
    spans.sort()
    return spans[int(len(spans) * 0.9)]


def _server_times(audit: pathlib.Path) -> tuple[float, float]:
    """p50 and p99 of received -> answered, in ms, over the applied operator writes."""
    spans = []
    with open(audit, encoding="utf-8") as lines:
        for line in lines:
            if judging.AGENT_PREFIX not in line or '"ResponseComplete"' not in line:
                continue
            event = json.loads(line)
            code = int((event.get("responseStatus") or {}).get("code") or 0)
            if event.get("verb") in judging.WRITE_VERBS and 200 <= code < 300:
                spans.append((judging.moment(event["stageTimestamp"]) -
                              judging.moment(event["requestReceivedTimestamp"])) * 1000)
    if not spans:
        return 0.0, 0.0
    spans.sort()
    return statistics.median(spans), spans[min(len(spans) - 1, int(len(spans) * 0.99))]
