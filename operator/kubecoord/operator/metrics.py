"""Prometheus metrics of the operator, served on :9090/metrics by ``kubecoord operator``.

=========================================  =========  ======================================
metric                                     type       labels / meaning
=========================================  =========  ======================================
kubecoord_operator_reconciles_total        counter    kind, result (ok|error)
kubecoord_operator_errors_total            counter    kind, stage (create|mirror|delete|rbac)
kubecoord_operator_leader_changes_total    counter    namespace, name: observed leader changes
kubecoord_operator_leader_present          gauge      namespace, name: 1 while the election has a
                                                      leader, 0 while it has none
kubecoord_operator_leader_present_since_   gauge      namespace, name: when leader_present last
timestamp_seconds                                     changed (unix time, as the operator saw it)
kubecoord_operator_lease_duration_seconds  gauge      namespace, name: spec.leaseDurationSeconds
kubecoord_operator_membership_changes_     counter    namespace, name, change (joined|left|expired)
total
kubecoord_operator_group_members           gauge      namespace, name: live members
kubecoord_operator_kv_keys                 gauge      namespace, name: keys in the store
kubecoord_operator_status_lag_seconds      histogram  kind: backend change seen -> status written
kubecoord_operator_is_leader               gauge      1 while this replica reconciles (HA)
kubecoord_operator_mirrored_resources      gauge      kind: resources whose status is mirrored
=========================================  =========  ======================================

The leader gauges feed the chart's alert "no leader for longer than N x the lease
duration" (charts/kubecoord/templates/prometheusrule.yaml): ``time() - since > N * lease``
while ``leader_present == 0``. They are what the active operator replica mirrors: a
standby exports none, and the series of an election are written on every status pass,
so they lag the backend by the status lag above.

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
LEADER_PRESENT = Gauge(
    "kubecoord_operator_leader_present", "1 while the election has a leader, 0 while it has none", ["namespace", "name"]
)
LEADER_PRESENT_SINCE = Gauge(
    "kubecoord_operator_leader_present_since_timestamp_seconds",
    "Unix time at which kubecoord_operator_leader_present last changed",
    ["namespace", "name"],
)
LEASE_DURATION = Gauge(
    "kubecoord_operator_lease_duration_seconds", "spec.leaseDurationSeconds of the election", ["namespace", "name"]
)
MEMBERSHIP_CHANGES = Counter(
    "kubecoord_operator_membership_changes",
    "Members joined, left or expired per group",
    ["namespace", "name", "change"],
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


_presence: dict[tuple[str, str], bool] = {}
"""(namespace, name) -> the presence last exported (only the mirror's event loop writes it)."""


def leader_presence(namespace: str, name: str, *, present: bool, lease_seconds: float) -> None:
    """Record whether an election has a leader; the timestamp moves only when that changes."""
    if _presence.get((namespace, name)) is not present:
        _presence[namespace, name] = present
        LEADER_PRESENT.labels(namespace, name).set(1.0 if present else 0.0)
        LEADER_PRESENT_SINCE.labels(namespace, name).set_to_current_time()
    LEASE_DURATION.labels(namespace, name).set(lease_seconds)


def forget(namespace: str, name: str) -> None:
    """Drop the per-resource series of a deleted resource."""
    _presence.pop((namespace, name), None)
    for metric in (LEADER_CHANGES, LEADER_PRESENT, LEADER_PRESENT_SINCE, LEASE_DURATION, GROUP_MEMBERS, KV_KEYS):
        with contextlib.suppress(KeyError):
            metric.remove(namespace, name)
    for change in ("joined", "left", "expired"):
        with contextlib.suppress(KeyError):
            MEMBERSHIP_CHANGES.remove(namespace, name, change)
