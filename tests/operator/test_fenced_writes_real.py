"""Fencing where the write lands, on the whole cluster: a deposed replica's write is refused
by the API server, not applied after its successor took over.

The chart's RBAC, term policy and policy on the operator's writes (templates/rbac.yaml,
templates/termpolicy.yaml, templates/operatorpolicy.yaml, rendered
for this module's release and applied), two ``kubecoord operator`` processes with a token
of the chart's ServiceAccount and ``--fence-writes``, as the chart's Deployment runs them.
Replica 1 runs under kubecoord_testkit.operator_freeze: at the write under test it passes
its own fencing check and then stops itself (SIGSTOP) before the send. While it is frozen
the spec moves on and replica 2 takes over; then replica 1 is resumed and its write goes
out in the old term. The audit log is the judge: the frozen write reached the API server
after replica 2's first write and was not applied, no write of replica 1 was answered 2xx
after replica 2's first, every operator write named a term, and a write naming replica
1's term is refused by the term policy (403); the RoleBinding stays as the new leader
wrote it and the removed client's Lease patch is refused. The frozen write's own answer
is 403 when the server judges it before the resumed replica — which notices at once that
it lost the Lease — cancels it; on this loaded machine it was cancelled in some runs about
20 ms after receipt (504, context canceled) and in one before it was sent; measured: 403
in 6 runs, 504 in 3, never received in 1; at load 12-23 with a storm running beside it, 403
in 1 of 7, 504 in 4, never received in 2. Without ``--fence-writes`` the
same write names no term and reaches the server unjudged — applied whenever the server
is quicker than that cancellation (the late grants applied 0.65-4.4 s after a takeover in
the two-replica storm that found the defect).
"""

from __future__ import annotations

import calendar
import json
import pathlib
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from kubecoord.operator import term
from kubecoord.wire import object_names
from kubecoord_testkit import operator_freeze
from kubecoord_testkit.servers.kubernetes import RealApiServer
from tests.chart import conftest as chart_fixtures
from tests.chart.conftest import CHART, run_helm
from tests.fixtures.real_kubernetes import MintKubeconfig, create_namespace, install_crds
from tests.fixtures.whole_cluster import kubectl  # noqa: F401  (fixture)
from tests.helpers import eventually
from tests.operator.test_controller_real import Api, Operator

pytestmark = pytest.mark.slow

helm = chart_fixtures.helm

RELEASE = f"f{uuid.uuid4().hex[:6]}"
ACCOUNT = f"{RELEASE}-kubecoord"
LEASE = "kubecoord-operator"
TIMINGS = (9.0, 6.0, 1.0)
"""The operators' Lease: a write may take min(6 / 2, 9 - 6) = 3 s (kubecoord.operator.fencing), so the
frozen write, once resumed, reaches the API server and is judged there rather than abandoned by
its own timeout on a loaded machine."""
TEMPLATES = ("templates/serviceaccount.yaml", "templates/rbac.yaml", "templates/termpolicy.yaml",
             "templates/operatorpolicy.yaml")


@dataclass(frozen=True)
class Chart:
    release_namespace: str
    namespace: str
    kubeconfig: pathlib.Path
    """The chart ServiceAccount's token."""


@pytest.fixture(scope="module")
def chart(real_cluster: RealApiServer, real_admin_api: k8s.ApiClient, helm: pathlib.Path,
          kubectl: pathlib.Path, mint_kubeconfig: MintKubeconfig) -> Iterator[Chart]:  # noqa: F811
    install_crds(real_admin_api)
    release_namespace = create_namespace(real_admin_api, "fence-system")
    namespace = create_namespace(real_admin_api, "fenced")
    shown = [arg for template in TEMPLATES for arg in ("--show-only", template)]
    rendered = run_helm(helm, "template", RELEASE, str(CHART), "--namespace", release_namespace,
                        "--kube-version", "1.32.0", "--set", "operator.allNamespaces=false",
                        "--set", f"operator.namespaces={{{namespace}}}", *shown)
    assert rendered.returncode == 0, rendered.stderr
    assert "kind: ValidatingAdmissionPolicy" in rendered.stdout

    def kubectl_(verb: str, *args: str) -> None:
        done = subprocess.run([str(kubectl), "--kubeconfig", str(real_cluster.admin_kubeconfig), verb, "-f", "-",
                               *args], input=rendered.stdout, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr

    kubectl_("apply")
    try:
        yield Chart(release_namespace, namespace, mint_kubeconfig(release_namespace, ACCOUNT, create=False))
    finally:
        kubectl_("delete", "--ignore-not-found", "--wait=false")


def _replica(chart: Chart, folder: pathlib.Path, identity: str, *, freeze: str | None = None) -> Operator:
    """With ``freeze``, armed by the file ``IDENTITY.armed`` in ``folder``: the first matching
    write sent while it exists freezes the replica."""
    env = {}
    if freeze is not None:
        env = {operator_freeze.PATTERN: freeze, operator_freeze.MARK: str(folder / f"{identity}.frozen"),
               operator_freeze.ARM: str(folder / f"{identity}.armed")}
    return Operator(chart.kubeconfig, chart.namespace, folder, identity,
                    ("--fence-writes", "--lease-name", LEASE),
                    lease_namespace=chart.release_namespace, program="kubecoord_testkit.operator_freeze", env=env,
                    timings=TIMINGS)


@dataclass(frozen=True)
class Write:
    received: float
    agent: str
    verb: str
    resource: str
    name: str
    code: int
    term: str


def _writes(real_api: RealApiServer, namespace: str) -> list[Write]:
    """Every write the operators made in ``namespace``, as the API server's audit log has it."""
    result = []
    for line in real_api.audit_log.read_text().splitlines():
        event = json.loads(line)
        agent = str(event.get("userAgent") or "")
        ref = event.get("objectRef") or {}
        if event.get("stage") != "ResponseComplete" or not agent.startswith("kubecoord-operator/"):
            continue
        if ref.get("namespace") != namespace or event.get("verb") not in ("create", "update", "patch", "delete"):
            continue
        extra = (event.get("impersonatedUser") or {}).get("extra") or {}
        stamp = event["requestReceivedTimestamp"]  # UTC, microseconds
        received = calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + float(f"0.{stamp[20:26] or 0}")
        resource = "/".join(part for part in (ref.get("resource"), ref.get("subresource")) if part)
        result.append(Write(received, agent.rsplit("/", 1)[-1], str(event["verb"]), resource, str(ref.get("name")),
                            int((event.get("responseStatus") or {}).get("code") or 0),
                            ",".join(extra.get(term.EXTRA) or [])))
    return result


def _await_frozen_write(real_api: RealApiServer, namespace: str, binding: str, within: float = 30.0) -> None:
    """Until the audit log holds replica 1's binding PATCH after its freeze (its answer is
    logged as the server completes it, which may be after replica 1 exited), for at most
    ``within`` seconds: the resumed replica may cancel it before it is sent, and then it
    never comes."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if sum(1 for w in _writes(real_api, namespace)
               if w.agent == "replica-1" and w.name == binding and w.verb == "patch") >= 1:
            return
        time.sleep(0.2)


def _lease_patch_status(kubeconfig: pathlib.Path, namespace: str, name: str) -> int:
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
    leases = k8s.CoordinationV1Api(k8s.ApiClient(configuration))
    try:
        leases.patch_namespaced_lease(name, namespace, {"metadata": {"labels": {"touched": "yes"}}})
    except ApiException as error:
        return int(error.status)
    return 200


def _subjects(api: Api, binding: str) -> list[str]:
    return sorted(s.name for s in api.rbac.read_namespaced_role_binding(binding, api.namespace).subjects or [])


def _clients(api: Api, name: str, clients: list[str]) -> None:
    api.custom.patch_namespaced_custom_object("kubecoord.dev", "v1alpha1", api.namespace, "leaderelections", name,
                                              {"spec": {"clients": clients}})


@pytest.mark.timeout(240)
def test_a_grant_frozen_between_check_and_send_is_refused_after_the_takeover(
    chart: Chart, real_admin_api: k8s.ApiClient, real_cluster: RealApiServer, mint_kubeconfig: MintKubeconfig,
    tmp_path: pathlib.Path,
) -> None:
    """spec.clients [keeper] -> [keeper, victim] (replica 1 freezes at that RoleBinding
    PATCH) -> [keeper] (victim removed while it is frozen); replica 2 takes over and binds
    [keeper]; replica 1 resumed sends [keeper, victim]. Unfenced, victim was bound again
    and could patch the Lease until the next resync."""
    api = Api(real_admin_api, chart.namespace)
    name = f"fence-{uuid.uuid4().hex[:6]}"
    binding = f"kubecoord-leaderelection-{name}"
    as_victim = mint_kubeconfig(chart.namespace, "victim")
    mint_kubeconfig(chart.namespace, "keeper")
    first = _replica(chart, tmp_path, "replica-1",
                     freeze=f"^PATCH /apis/rbac.authorization.k8s.io/v1/namespaces/{chart.namespace}/rolebindings/"
                            f"{binding}$").start()
    second: Operator | None = None
    try:
        eventually(lambda: "leading: starting reconciliation" in first.text(), timeout=60, interval=0.2)
        assert "writes fenced at the API server" in first.text()
        second = _replica(chart, tmp_path, "replica-2").start()
        api.create("LeaderElection", name, {"leaseDurationSeconds": 3, "renewDeadlineSeconds": 2,
                                            "retryPeriodSeconds": 0.5, "clients": ["keeper"]})
        eventually(lambda: api.ready("LeaderElection", name), timeout=60, interval=0.3)
        assert _subjects(api, binding) == ["keeper"]
        # Armed only now: under load the first reconcile's own PATCH of the binding (a retry
        # after a write timed out) would otherwise freeze replica 1 with [keeper] instead.
        (tmp_path / "replica-1.armed").touch()
        _clients(api, name, ["keeper", "victim"])
        eventually(lambda: (tmp_path / "replica-1.frozen").exists(), timeout=60, interval=0.1)
        _clients(api, name, ["keeper"])  # victim removed while replica 1 is frozen with its grant
        # Replica 2 binds what the spec says: if the removal above reached it only after its
        # takeover (a slow API server), its first binding write is [keeper, victim] and a
        # later one [keeper], so wait for the binding as the spec says, written by replica 2.
        eventually(lambda: any(w.agent == "replica-2" and w.name == binding and w.code < 300
                               for w in _writes(real_cluster, chart.namespace))
                   and _subjects(api, binding) == ["keeper"], timeout=120, interval=0.3)
        assert first.process is not None
        first.process.send_signal(signal.SIGCONT)
        eventually(lambda: first.process is not None and first.process.poll() is not None, timeout=60, interval=0.2)
        _await_frozen_write(real_cluster, chart.namespace, binding)
        assert _subjects(api, binding) == ["keeper"], "the deposed replica's grant was applied"
        assert _lease_patch_status(as_victim, chart.namespace, name) == 403
    finally:
        if first.process is not None and first.process.poll() is None:
            first.process.send_signal(signal.SIGCONT)
        first.stop()
        if second is not None:
            second.stop()
        print(first.text()[-3000:])
    writes = _writes(real_cluster, chart.namespace)
    takeover = min(w.received for w in writes if w.agent == "replica-2")
    for w in writes:
        print(f"{w.received - takeover:8.3f} {w.agent} {w.verb} {w.resource} {w.name} {w.code} {w.term}")
    if second is not None:
        print(second.text()[:3000])
    late = [w for w in writes if w.agent == "replica-1" and w.received >= takeover]
    assert not [w for w in late if w.code < 300], f"writes of the deposed replica applied after the takeover: {late}"
    frozen = [w for w in late if w.resource == "rolebindings" and w.verb == "patch"]
    print("the frozen write, as the API server answered it:", frozen or "never received")
    assert all(w.term for w in writes), "an operator write that names no term"
    assert {w.term for w in writes if w.agent == "replica-1"} == {"replica-1/1"}
    # What the API server does with a write of replica 1's term now (the frozen one itself may
    # have been cancelled by its resumed replica before it was judged): refused by the policy.
    assert _stale_write_status(chart, "replica-1/1") == 403


def _stale_write_status(chart: Chart, stale: str) -> int:
    """A dry-run ConfigMap create by the chart's ServiceAccount naming ``stale`` as its term,
    labelled as kubecoord's: the chart's policy on the operator's writes refuses an
    unlabelled one too, and which of two refusing policies the answer names varies."""
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(config_file=str(chart.kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
    client = k8s.ApiClient(configuration)
    holder, transitions = stale.rsplit("/", 1)
    for name, value in term.headers(f"system:serviceaccount:{chart.release_namespace}:{ACCOUNT}",
                                    term.Term(holder, int(transitions))).items():
        client.set_default_header(name, value)
    try:
        k8s.CoreV1Api(client).create_namespaced_config_map(
            chart.namespace, {"metadata": {"name": "stale-term", "labels": {object_names.MANAGED_BY_LABEL:
                                                                            object_names.MANAGED_BY}}},
            dry_run="All")  # type: ignore[arg-type]
    except ApiException as error:
        assert error.status != 403 or "operator-term" in str(error.body), error.body
        return int(error.status)
    finally:
        client.close()  # type: ignore[no-untyped-call]
    return 201


def _write_as(kubeconfig: pathlib.Path, namespace: str, headers: dict[str, str]) -> tuple[int, str]:
    """A dry-run ConfigMap create in ``namespace`` by ``kubeconfig``'s identity with
    ``headers`` (impersonation): the status and the Status message. The ConfigMap carries
    kubecoord's managed-by label, so the chart's operator-writes policy admits it and a
    refusal after the impersonation can only be the term policy's (with two refusing
    policies, the answer names whichever the API server evaluated first)."""
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
    client = k8s.ApiClient(configuration)
    for name, value in headers.items():
        client.set_default_header(name, value)
    try:
        k8s.CoreV1Api(client).create_namespaced_config_map(
            namespace, {"metadata": {"name": "forged-term", "labels": {"app.kubernetes.io/managed-by": "kubecoord"}}},
            dry_run="All")  # type: ignore[arg-type]
    except ApiException as error:
        return int(error.status), str(json.loads(error.body or "{}").get("message") or "")
    finally:
        client.close()  # type: ignore[no-untyped-call]
    return 201, ""


@pytest.mark.timeout(120)
def test_no_identity_but_the_operators_own_can_name_a_term_or_reach_past_its_grant(
    chart: Chart, real_cluster: RealApiServer, mint_kubeconfig: MintKubeconfig,
) -> None:
    """A forged term needs impersonation, and the chart's RBAC gives it to the operator's
    ServiceAccount only, for itself and the term extra alone: a client ServiceAccount (one a
    spec.clients grant may name) cannot pose as the operator nor give itself a term; a user
    with no rights cannot either; and the operator cannot impersonate a client, a group
    (system:masters) or another user. Each refusal is the impersonation's own (403 naming
    impersonate), before any admission policy, so it holds while no operator Lease exists
    (then the term policy admits everything: parameterNotFoundAction Allow)."""
    operator = f"system:serviceaccount:{chart.release_namespace}:{ACCOUNT}"
    client = mint_kubeconfig(chart.namespace, "forger")
    forged = term.Term("replica-9", 99)
    as_operator = term.headers(operator, forged)
    extra_header = next(name for name in as_operator if name.startswith("Impersonate-Extra-"))
    attempts = {
        "client as the operator": (client, as_operator),
        "client naming a term for itself": (client, term.headers(f"system:serviceaccount:{chart.namespace}:forger",
                                                                 forged)),
        "user dev as the operator": (real_cluster.dev_kubeconfig, as_operator),
        "operator as a client": (chart.kubeconfig, term.headers(f"system:serviceaccount:{chart.namespace}:forger",
                                                                forged)),
        "operator as itself in system:masters": (chart.kubeconfig, {**as_operator,
                                                                    "Impersonate-Group": "system:masters"}),
        "operator as user admin": (chart.kubeconfig, {"Impersonate-User": "admin", extra_header: str(forged)}),
    }
    answers = {what: _write_as(kubeconfig, chart.namespace, headers)
               for what, (kubeconfig, headers) in attempts.items()}
    for what, answer in answers.items():
        print(what, answer)
    assert all(code == 403 and "impersonate" in message for code, message in answers.values()), answers
    # The one impersonation the chart grants still works (the refusals above are not a broken setup).
    code, message = _write_as(chart.kubeconfig, chart.release_namespace, as_operator)
    assert code != 403 or "operator-term" in message, message
