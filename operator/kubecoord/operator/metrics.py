"""Prometheus metrics of the operator, served on :9090/metrics by ``kubecoord operator``.

=========================================  =========  ======================================
metric                                     type       labels / meaning
=========================================  =========  ======================================
kubecoord_operator_reconciles_total        counter    kind, result (ok|error)
kubecoord_operator_errors_total            counter    kind, stage (create|mirror|delete|rbac)
kubecoord_operator_leader_changes_total    counter    namespace, name: observed leader changes
kubecoord_operator_group_members           gauge      namespace, name: live members
kubecoord_operator_kv_keys                 gauge      namespace, name: keys in the store
kubecoord_operator_status_lag_seconds      histogram  kind: backend change seen -> status written
kubecoord_operator_is_leader               gauge      1 while this replica reconciles (HA)
kubecoord_operator_mirrored_resources      gauge      kind: resources whose status is mirrored
=========================================  =========  ======================================

Per-resource series are removed when the resource is deleted, so 500 short-lived
resources do not leave 500 stale series behind.
"""

from __future__ import annotations

import contextlib

from prometheus_client import Counter, Gauge, Histogram

RECONCILES = Counter("kubecoord_operator_reconciles", "Reconciliations by kind and result", ["kind", "result"])
ERRORS = Counter("kubecoord_operator_errors", "Errors by kind and stage", ["kind", "stage"])
LEADER_CHANGES = Counter(
    "kubecoord_operator_leader_changes", "Leader changes observed per election", ["namespace", "name"]
)
GROUP_MEMBERS = Gauge("kubecoord_operator_group_members", "Live members per group", ["namespace", "name"])
KV_KEYS = Gauge("kubecoord_operator_kv_keys", "Keys per store", ["namespace", "name"])
STATUS_LAG = Histogram(
    "kubecoord_operator_status_lag_seconds",
    "Seconds from a backend change reaching the operator to the status being written",
    ["kind"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
IS_LEADER = Gauge("kubecoord_operator_is_leader", "1 while this replica is the active operator")
MIRRORED = Gauge("kubecoord_operator_mirrored_resources", "Resources whose status is mirrored", ["kind"])


def forget(namespace: str, name: str) -> None:
    """Drop the per-resource series of a deleted resource."""
    for metric in (LEADER_CHANGES, GROUP_MEMBERS, KV_KEYS):
        with contextlib.suppress(KeyError):
            metric.remove(namespace, name)
