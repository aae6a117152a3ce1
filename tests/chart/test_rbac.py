"""The operator can grant what it grants: Kubernetes refuses a Role with permissions its
creator lacks (the chart gives no `escalate`), so every rule the operator writes for
`spec.clients` must be covered by the chart's rules in every watched namespace."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from kubecoord.operator import rbac
from tests.chart.conftest import CHART, Render, by_kind


def allows(rules: list[dict[str, Any]], group: str, resource: str, verb: str, name: str | None) -> bool:
    return any(
        group in rule["apiGroups"]
        and resource in rule["resources"]
        and verb in rule["verbs"]
        and (not rule.get("resourceNames") or name in rule["resourceNames"])
        for rule in rules
    )


def uncovered(granted: list[dict[str, Any]], held: list[dict[str, Any]]) -> list[tuple[str, str, str, str | None]]:
    missing = []
    for rule in granted:
        names = rule.get("resourceNames") or [None]
        for group, resource, verb, name in itertools.product(
            rule["apiGroups"], rule["resources"], rule["verbs"], names
        ):
            if not allows(held, group, resource, verb, name):
                missing.append((group, resource, verb, name))
    return missing


@pytest.mark.parametrize("kind", ["LeaderElection", "Group", "KVStore"])
@pytest.mark.parametrize("backend", ["kubernetes", "zookeeper", "cassandra", "etcd"])
@pytest.mark.parametrize("all_namespaces", [True, False])
def test_the_operator_holds_every_permission_it_grants(
    render: Render, kind: str, backend: str, all_namespaces: bool
) -> None:
    objects = render(
        "--set", f"operator.allNamespaces={str(all_namespaces).lower()}", "--set", "operator.namespaces={apps}"
    )
    held_kind = "ClusterRole" if all_namespaces else "Role"
    (held,) = [r for r in by_kind(objects, held_kind) if r["metadata"]["name"] == "kc-kubecoord"]
    body = {
        "apiVersion": "kubecoord.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": "billing", "namespace": "apps", "uid": "u"},
        "spec": {"backend": backend, "clients": ["billing"]},
    }
    if backend == "etcd":  # its clients are granted the Secret of its credentials
        body["spec"]["etcd"] = {"hosts": ["etcd"], "secretName": "etcd-auth"}
    role, _ = rbac.objects(body)
    if backend == "etcd":
        assert {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["etcd-auth"]} in \
            role["rules"]
    assert role["rules"], "the operator grants at least get on the resource"
    assert uncovered(role["rules"], held["rules"]) == []


def test_the_check_notices_a_missing_permission() -> None:
    held = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
    granted = [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["x"], "verbs": ["get", "patch"]}]
    assert uncovered(granted, held) == [("", "configmaps", "patch", "x")]


def test_the_readme_explains_every_rule(render: Render) -> None:
    readme = (CHART / "README.md").read_text()
    (held,) = [r for r in by_kind(render(), "ClusterRole") if r["metadata"]["name"] == "kc-kubecoord"]
    for rule in held["rules"]:
        for resource in rule["resources"]:
            lines = [row for row in readme.splitlines() if row.startswith("|") and resource.split("/")[0] in row]
            assert lines, f"{resource} is not in the README's RBAC tables"
            # A row per rule: create has one of its own where the other writes are another.
            assert any(all(verb in line for verb in rule["verbs"]) for line in lines), f"{resource}: {rule['verbs']}"


@pytest.mark.parametrize("read_secrets", [True, False])
def test_secrets_are_read_by_get_only_and_only_when_the_value_allows(render: Render, read_secrets: bool) -> None:
    objects = render("--set", f"rbac.readBackendSecrets={str(read_secrets).lower()}")
    (held,) = [r for r in by_kind(objects, "ClusterRole") if r["metadata"]["name"] == "kc-kubecoord"]
    assert allows(held["rules"], "", "secrets", "get", "etcd-auth") is read_secrets
    assert not any(allows(held["rules"], "", "secrets", verb, None) for verb in ("list", "watch", "create", "patch"))


@pytest.mark.parametrize("all_namespaces", [True, False])
def test_the_readiness_reviews_ask_only_what_the_chart_grants(render: Render, all_namespaces: bool) -> None:
    """kubecoord.operator.access asks each write its work needs of the API server; with the
    chart's own rules every answer is yes (else a correct install would never be ready)."""
    from kubecoord.operator import access

    objects = render(
        "--set", f"operator.allNamespaces={str(all_namespaces).lower()}", "--set", "operator.namespaces={apps}"
    )
    held_kind = "ClusterRole" if all_namespaces else "Role"
    (held,) = [r for r in by_kind(objects, held_kind) if r["metadata"]["name"] == "kc-kubecoord"]
    for review in access.writes(("apps",), clusterwide=all_namespaces):
        resource = review["resource"] + (f"/{review['subresource']}" if "subresource" in review else "")
        assert allows(held["rules"], review["group"], resource, review["verb"], None), review
