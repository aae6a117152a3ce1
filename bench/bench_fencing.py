"""Cost of fencing the operator's writes at the API server (kubecoord.operator.term), on
the real kube-apiserver.

    .venv/bin/python bench/bench_fencing.py [--writes 600] [--rounds 6]

The chart's term policy (templates/termpolicy.yaml, rendered with the Makefile's helm for
a release whose ServiceAccount is ``operator``) with the operator Lease as its parameter,
and a ServiceAccount token as the operator's identity. Each write is a merge PATCH of a
ConfigMap through the operator's own write path (kubecoord.operator.kubeapi.acall, on the
event loop), sequential, in three modes interleaved round by round (the machine's load
drifts): ``unfenced`` (no term: the policy's match conditions skip it), ``impersonated``
(the term headers, but impersonating a second ServiceAccount the policy does not match:
what impersonation alone costs) and ``fenced`` (the term headers, the policy judging).
Printed per mode: requests the API server counted per write (apiserver_request_total),
and latency p50/p99/mean in ms.
Then the takeover's cost: ``term.confirm`` after the Lease moved to a new holder —
requests and milliseconds until the API server admitted the new term and refused the old.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import statistics
import subprocess
import sys
import time
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.dynamic import DynamicClient

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from kubecoord.operator import fencing, kubeapi, term
from kubecoord_testkit.servers.kubernetes import RealApiServer
from measure import load, pct
from real_server import ROOT, RequestCounter, real_server

NAMESPACE = "bench-fencing"
ACCOUNT = "operator"
LEASE = "kubecoord-operator"
USERNAME = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
OTHER = "bystander"
"""A ServiceAccount with the same rights that the policy does not judge."""
MODES = ("unfenced", "impersonated", "fenced")


def render_policy() -> list[dict[str, Any]]:
    helm = ROOT / ".venv" / "bin" / "helm"
    if not helm.exists():
        raise SystemExit(f"no helm at {helm}: make helm")
    done = subprocess.run([str(helm), "template", "bench", str(ROOT / "charts" / "kubecoord"), "--namespace",
                           NAMESPACE, "--kube-version", "1.32.0", "--set", f"serviceAccount.name={ACCOUNT}",
                           "--set", f"operator.leaseName={LEASE}", "--show-only", "templates/termpolicy.yaml"],
                          capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def setup(server: RealApiServer, admin: k8s.ApiClient) -> pathlib.Path:
    """Namespace, ServiceAccount with the chart's fencing rights, the operator Lease; the
    ServiceAccount's token kubeconfig. (Bodies are dicts: the client serializes them as they
    are, hence the arg-type ignores.)"""
    core, rbac = k8s.CoreV1Api(admin), k8s.RbacAuthorizationV1Api(admin)
    core.create_namespace({"metadata": {"name": NAMESPACE}})  # type: ignore[arg-type]
    for account in (ACCOUNT, OTHER):
        core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": account}})  # type: ignore[arg-type]
    rbac.create_cluster_role({"metadata": {"name": "bench-fencing"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "patch", "delete"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": [f"userextras/{term.EXTRA}"], "verbs": ["impersonate"]},
        {"apiGroups": [""], "resources": ["serviceaccounts"], "resourceNames": [ACCOUNT, OTHER],
         "verbs": ["impersonate"]},
    ]})  # type: ignore[arg-type]
    rbac.create_cluster_role_binding({"metadata": {"name": "bench-fencing"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "bench-fencing"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
                     for account in (ACCOUNT, OTHER)]})  # type: ignore[arg-type]
    k8s.CoordinationV1Api(admin).create_namespaced_lease(NAMESPACE, {"metadata": {"name": LEASE}, "spec": {
        "holderIdentity": "replica-1", "leaseTransitions": 1, "leaseDurationSeconds": 15}})  # type: ignore[arg-type]
    core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "target"}, "data": {"n": "0"}})  # type: ignore[arg-type]
    token = core.create_namespaced_service_account_token(
        ACCOUNT, NAMESPACE, {"spec": {"expirationSeconds": 3600}})  # type: ignore[arg-type]
    assert token.status is not None  # the server fills it in
    return server.token_kubeconfig(server.workdir / "operator.kubeconfig", str(token.status.token),
                                   namespace=NAMESPACE)


async def writes(count: int, offset: int) -> list[float]:
    path = f"{kubeapi.collection_path('v1', 'configmaps', NAMESPACE)}/target"
    samples = []
    for i in range(count):
        start = time.perf_counter()
        await kubeapi.acall("PATCH", path, {"data": {"n": str(offset + i)}}, content_type=kubeapi.MERGE_PATCH)
        samples.append(time.perf_counter() - start)
    return samples


def install_mode(mode: str, current: term.Term) -> None:
    headers = {}
    if mode == "impersonated":
        headers = term.headers(f"system:serviceaccount:{NAMESPACE}:{OTHER}", current)
    elif mode == "fenced":
        headers = term.headers(USERNAME, current)
    fencing.install(lambda: True, headers=headers)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=600, help="writes per mode")
    parser.add_argument("--rounds", type=int, default=6, help="rounds the modes are interleaved in")
    parser.add_argument("--takeovers", type=int, default=10)
    args = parser.parse_args()
    with real_server() as server:
        if server is None:
            return 0
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(config_file=str(server.admin_kubeconfig),  # type: ignore[no-untyped-call]
                                    client_configuration=configuration)
        admin = k8s.ApiClient(configuration)
        kubeconfig = setup(server, admin)
        os.environ["KUBECONFIG"] = str(kubeconfig)
        kubeapi.reset()
        documents = render_policy()
        dynamic = DynamicClient(admin)  # type: ignore[no-untyped-call]
        policy = [dynamic.resources.get(api_version=d["apiVersion"], kind=d["kind"]) for d in documents]
        for resource, document in zip(policy, documents, strict=True):
            resource.create(body=document)
        counter = RequestCounter(server)
        current = term.Term("replica-1", 1)
        # The policy and its parameter reach the server's informers: its term admitted, another refused.
        term.confirm(USERNAME, current, NAMESPACE, timeout=60, leading=lambda: True)
        samples: dict[str, list[float]] = {mode: [] for mode in MODES}
        requests: dict[str, int] = dict.fromkeys(MODES, 0)
        per_round = max(1, args.writes // args.rounds)
        print(f"load before: {load()}")
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(writes(20, -20))  # warm the connection pool
            for round_ in range(args.rounds):
                for mode in MODES:
                    install_mode(mode, current)
                    before = counter.total()
                    samples[mode] += loop.run_until_complete(writes(per_round, round_ * 10_000))
                    requests[mode] += counter.total() - before
            print(f"{per_round * args.rounds} sequential ConfigMap PATCHes per mode through kubeapi.acall "
                  f"(real kube-apiserver, a ServiceAccount token):")
            print(f"{'mode':<13} {'requests/write':>14} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
            for mode in MODES:
                values = samples[mode]
                # The counter's own GET of /metrics is not a resource request: not counted.
                print(f"{mode:<13} {requests[mode] / len(values):>14.2f} {pct(values, 50) * 1e3:>8.2f} "
                      f"{pct(values, 99) * 1e3:>8.2f} {statistics.fmean(values) * 1e3:>8.2f}")
            base = statistics.median(samples["unfenced"])
            print(f"fenced - unfenced, p50: {(statistics.median(samples['fenced']) - base) * 1e3:+.2f} ms a write "
                  f"(impersonation alone: {(statistics.median(samples['impersonated']) - base) * 1e3:+.2f} ms)")
            install_mode("fenced", current)
            leases = k8s.CoordinationV1Api(admin)
            confirm_ms, confirm_requests = [], []
            for takeover in range(args.takeovers):
                current = term.Term(f"replica-{2 + takeover % 2}", current.transitions + 1)
                leases.patch_namespaced_lease(LEASE, NAMESPACE, {"spec": {
                    "holderIdentity": current.holder, "leaseTransitions": current.transitions}})
                before, start = counter.total(), time.perf_counter()
                term.confirm(USERNAME, current, NAMESPACE, timeout=30, leading=lambda: True, interval=0.01)
                confirm_ms.append((time.perf_counter() - start) * 1e3)
                confirm_requests.append(counter.total() - before)
            print(f"takeover confirmation ({args.takeovers} Lease moves): {statistics.mean(confirm_requests):.1f} "
                  f"requests, {statistics.median(confirm_ms):.1f} ms median, {max(confirm_ms):.1f} ms max")
        finally:
            loop.run_until_complete(_close())
            loop.close()
        print(f"load after: {load()}")
    return 0


async def _close() -> None:
    from kubecoord.operator import kubeapi

    await kubeapi.aclose()


if __name__ == "__main__":
    sys.exit(main())
