"""The chart renders what the operator needs, securely, in both watch modes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.chart.conftest import CHART, Render, by_kind


def the(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (obj,) = by_kind(objects, kind)
    return obj


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (result,) = the(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(result)


def test_default_render_has_every_object(render: Render) -> None:
    objects = render()
    kinds = sorted(obj["kind"] for obj in objects)
    assert kinds == sorted(
        ["ServiceAccount", "Deployment", "Service", "Role", "RoleBinding", "PodDisruptionBudget"]
        + ["ClusterRole", "ClusterRoleBinding"] * 2
        # Group clients, operator terms, the operator's writes
        + ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"] * 3
        + ["CustomResourceDefinition"] * 3
    )
    for obj in objects:
        if obj["kind"] not in ("ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                               "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
            assert obj["metadata"]["namespace"] == "kubecoord-system", obj["metadata"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/instance"] == "kc"


def test_deployment_runs_two_hardened_replicas(render: Render) -> None:
    objects = render()
    deployment = the(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    c = container(objects)
    assert c["securityContext"] == {
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert set(c["resources"]) == {"requests", "limits"}
    assert set(c["resources"]["requests"]) == {"cpu", "memory"} == set(c["resources"]["limits"])
    assert pod["serviceAccountName"] == the(objects, "ServiceAccount")["metadata"]["name"]


def test_deployment_command_probes_ports_and_downward_api(render: Render) -> None:
    c = container(render())
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert c["image"] == f"kubecoord/operator:{chart['appVersion']}"
    assert c["command"] == ["kubecoord", "operator"]
    assert c["args"] == ["--all-namespaces", "--lease-duration=15", "--renew-deadline=10", "--retry-period=2",
                         "--confinement-policy=kubecoord-lease-grants",
                         "--confinement-binding=kc-kubecoord-lease-grants", "--fence-writes"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"health": 8080, "metrics": 9090}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in c["env"]}
    assert env["POD_NAME"] == "metadata.name"
    assert env["POD_NAMESPACE"] == "metadata.namespace"


def test_metrics_service_selects_the_operator_pods(render: Render) -> None:
    objects = render()
    service = the(objects, "Service")
    pod_labels = the(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}]
    assert not by_kind(render("--set", "metrics.enabled=false"), "Service")


def test_namespaced_mode_uses_roles_in_each_watched_namespace(render: Render) -> None:
    objects = render("--set", "operator.allNamespaces=false", "--set", "operator.namespaces={apps,jobs}")
    assert container(objects)["args"][:2] == ["--namespace=apps", "--namespace=jobs"]
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]) for r in by_kind(objects, "Role")}
    assert roles == {
        ("apps", "kc-kubecoord"),
        ("jobs", "kc-kubecoord"),
        ("kubecoord-system", "kc-kubecoord-leader-election"),
    }
    (cluster_role,) = by_kind(objects, "ClusterRole")  # discovery only: no cluster-wide writes
    assert {v for rule in cluster_role["rules"] if rule["resources"] != ["userextras/kubecoord.dev/term"]
            for v in rule["verbs"]} <= {"get", "list", "watch"}
    namespaces = [r for r in cluster_role["rules"] if r["resources"] == ["namespaces"]]
    assert namespaces, "kopf lists and watches namespaces when it serves a set of them"


def test_namespaced_mode_defaults_to_the_release_namespace(render: Render) -> None:
    objects = render("--set", "operator.allNamespaces=false", namespace="team-a")
    assert container(objects)["args"][0] == "--namespace=team-a"


def test_leader_election_role_is_limited_to_the_operator_lease(render: Render) -> None:
    objects = render("--set", "operator.leaseName=my-lease")
    (role,) = [r for r in by_kind(objects, "Role") if r["metadata"]["name"].endswith("leader-election")]
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["my-lease", "my-lease.epoch"],  # its epochs' high-water mark
            "verbs": ["get", "list", "watch", "update", "patch"],
        },
        # its election binds by name: the LeaderElection of that name, if any (404: none)
        {
            "apiGroups": ["kubecoord.dev"],
            "resources": ["leaderelections"],
            "resourceNames": ["my-lease"],
            "verbs": ["get"],
        },
        # fenced writes: the pod's ServiceAccount impersonates itself to name its term
        {"apiGroups": [""], "resources": ["serviceaccounts"], "resourceNames": ["kc-kubecoord"],
         "verbs": ["impersonate"]},
    ]
    env = {e["name"]: e.get("value") for e in container(objects)["env"]}
    assert env["KUBECOORD_OPERATOR_LEASE"] == "my-lease"


def test_crds_can_be_left_out_and_kept(render: Render) -> None:
    assert not by_kind(render("--set", "crds.enabled=false"), "CustomResourceDefinition")
    kept = by_kind(render(), "CustomResourceDefinition")
    assert all(c["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"} for c in kept)
    not_kept = by_kind(render("--set", "crds.keep=false"), "CustomResourceDefinition")
    assert all("annotations" not in c["metadata"] for c in not_kept)


def test_long_release_names_are_truncated_to_63_characters(helm: Path) -> None:
    from tests.chart.conftest import run_helm

    # Helm allows release names up to 53 characters; suffixes like -leader-election go beyond 63.
    for args in (["r" * 52 + "s"], ["kc", "--set", "fullnameOverride=" + "f" * 62 + "g"]):
        result = run_helm(helm, "template", *args, str(CHART))
        assert result.returncode == 0, result.stderr
        names = [d["metadata"]["name"] for d in yaml.safe_load_all(result.stdout) if d]
        assert all(len(name) <= 63 and not name.endswith("-") for name in names), names
        assert any(len(name) == 63 for name in names)


def test_operator_election_timings_are_passed_and_checked(render: Render, helm: Path) -> None:
    from tests.chart.conftest import run_helm

    timings = '{"leaseDurationSeconds": 8, "renewDeadlineSeconds": 5.5, "retryPeriodSeconds": 1}'
    args = container(render("--set-json", f"operator.leaderElection={timings}"))["args"]
    assert args[1:4] == ["--lease-duration=8", "--renew-deadline=5.5", "--retry-period=1"]
    result = run_helm(helm, "template", "kc", str(CHART), "--set", "operator.leaderElection.renewDeadlineSeconds=15")
    assert result.returncode != 0
    assert "renewDeadlineSeconds must be less than leaseDurationSeconds" in result.stderr


def test_disruption_budget_keeps_a_standby(render: Render) -> None:
    objects = render()
    budget = the(objects, "PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1
    pod_labels = the(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert not by_kind(render("--set", "replicaCount=1"), "PodDisruptionBudget")


def test_group_clients_fail_closed_unless_the_policy_is_in_force_or_accepted(render: Render) -> None:
    """The operator is told which policy confines Group clients (it grants their Lease writes
    only while that policy and its binding exist) and may read exactly those two objects;
    accepting unconfined clients is a value of its own, off by default. The policy is one
    per cluster (named independently of the release, kept on uninstall), the binding the
    release's own."""
    objects = render()
    (policy,) = [p for p in by_kind(objects, "ValidatingAdmissionPolicy")
                 if p["spec"].get("paramKind", {}).get("kind") == "ConfigMap"]
    (binding,) = [b for b in by_kind(objects, "ValidatingAdmissionPolicyBinding")
                  if b["spec"]["policyName"] == policy["metadata"]["name"]]
    name = policy["metadata"]["name"]
    assert name == binding["spec"]["policyName"] == "kubecoord-lease-grants"
    assert binding["metadata"]["name"] == "kc-kubecoord-lease-grants"
    assert policy["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert "annotations" not in binding["metadata"]  # goes with its release
    args = container(objects)["args"]
    assert f"--confinement-policy={name}" in args and "--confinement-binding=kc-kubecoord-lease-grants" in args
    assert "--allow-unconfined-group-clients" not in args
    (discovery,) = [r for r in by_kind(objects, "ClusterRole") if r["metadata"]["name"].endswith("-discovery")]
    assert {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingadmissionpolicies"],
            "resourceNames": [name], "verbs": ["get"]} in discovery["rules"]
    assert {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingadmissionpolicybindings"],
            "resourceNames": ["kc-kubecoord-lease-grants"], "verbs": ["get"]} in discovery["rules"]
    # Without the policy the operator fails closed; only the explicit value opens it.
    unconfined = render("--set", "rbac.confineGroupClients=false")
    assert [p["metadata"]["name"] for p in by_kind(unconfined, "ValidatingAdmissionPolicy")] == [
        "kc-kubecoord-operator-writes", "kc-kubecoord-operator-term"]
    assert "--allow-unconfined-group-clients" not in container(unconfined)["args"]
    accepted = render("--set", "rbac.confineGroupClients=false", "--set", "rbac.allowUnconfinedGroupClients=true")
    assert "--allow-unconfined-group-clients" in container(accepted)["args"]
    # Watching every namespace, the binding applies everywhere; a namespaced release only
    # where it watches, so a second release does not confine the first one's namespaces.
    assert "matchResources" not in binding["spec"]
    (scoped,) = [b for b in by_kind(render("--set", "operator.allNamespaces=false",
                                           "--set", "operator.namespaces={apps,jobs}"),
                                    "ValidatingAdmissionPolicyBinding") if b["spec"]["policyName"] == name]
    assert scoped["spec"]["matchResources"] == {"namespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["apps", "jobs"]}]}}


def test_the_operators_writes_are_fenced_by_its_lease_unless_turned_off(render: Render) -> None:
    """The term policy takes the operator Lease of the release namespace as its parameter and
    judges only the chart ServiceAccount's writes that name a term; the operator is told to
    name it and may impersonate itself for it. rbac.fenceOperatorWrites=false: none of it."""
    objects = render("--set", "operator.leaseName=my-lease")
    (policy,) = [p for p in by_kind(objects, "ValidatingAdmissionPolicy")
                 if p["spec"].get("paramKind", {}).get("kind") == "Lease"]
    (binding,) = [b for b in by_kind(objects, "ValidatingAdmissionPolicyBinding")
                  if b["spec"]["policyName"] == policy["metadata"]["name"] == "kc-kubecoord-operator-term"]
    assert binding["spec"]["paramRef"] == {"name": "my-lease", "namespace": "kubecoord-system",
                                           "parameterNotFoundAction": "Allow"}
    assert binding["spec"]["validationActions"] == ["Deny"]
    conditions = {c["name"]: c["expression"] for c in policy["spec"]["matchConditions"]}
    assert "'system:serviceaccount:kubecoord-system:kc-kubecoord'" in conditions["the-operator"]
    assert conditions["names-a-term"] == "'kubecoord.dev/term' in request.userInfo.extra"
    written = {(g, r) for rule in policy["spec"]["matchConstraints"]["resourceRules"]
               for g in rule["apiGroups"] for r in rule["resources"]}
    assert {("kubecoord.dev", "leaderelections/status"), ("rbac.authorization.k8s.io", "rolebindings"),
            ("", "configmaps"), ("coordination.k8s.io", "leases"), ("", "events")} <= written
    assert "--fence-writes" in container(objects)["args"]
    (discovery,) = [r for r in by_kind(objects, "ClusterRole") if r["metadata"]["name"].endswith("-discovery")]
    assert {"apiGroups": ["authentication.k8s.io"], "resources": ["userextras/kubecoord.dev/term"],
            "verbs": ["impersonate"]} in discovery["rules"]
    off = render("--set", "rbac.fenceOperatorWrites=false")
    assert [p["metadata"]["name"] for p in by_kind(off, "ValidatingAdmissionPolicy")] == [
        "kubecoord-lease-grants", "kc-kubecoord-operator-writes"]
    assert "--fence-writes" not in container(off)["args"]
    assert "impersonate" not in yaml.safe_dump(off)


def test_the_operators_writes_are_confined_to_kubecoords_objects_unless_turned_off(render: Render) -> None:
    """The chart ServiceAccount's Lease, ConfigMap, Role and RoleBinding writes are judged
    (RBAC cannot narrow them): the object before and after must be labelled as kubecoord's.
    Its RBAC has create apart from the other writes, and no update where it never PUTs."""
    objects = render()
    (policy,) = [p for p in by_kind(objects, "ValidatingAdmissionPolicy")
                 if p["metadata"]["name"] == "kc-kubecoord-operator-writes"]
    (binding,) = [b for b in by_kind(objects, "ValidatingAdmissionPolicyBinding")
                  if b["spec"]["policyName"] == "kc-kubecoord-operator-writes"]
    assert binding["spec"]["validationActions"] == ["Deny"] and "paramRef" not in binding["spec"]
    assert "paramKind" not in policy["spec"]  # no ConfigMap parameters: no part in the param-informer defect
    assert policy["spec"]["failurePolicy"] == "Fail"
    judged = {(g, r, tuple(rule["operations"])) for rule in policy["spec"]["matchConstraints"]["resourceRules"]
              for g in rule["apiGroups"] for r in rule["resources"]}
    writes = ("CREATE", "UPDATE", "DELETE")
    assert judged == {("coordination.k8s.io", "leases", writes), ("", "configmaps", writes),
                      ("rbac.authorization.k8s.io", "roles", writes),
                      ("rbac.authorization.k8s.io", "rolebindings", writes)}
    (condition,) = policy["spec"]["matchConditions"]
    assert condition["expression"] == (
        "request.userInfo.username == 'system:serviceaccount:kubecoord-system:kc-kubecoord'")
    (role,) = [r for r in by_kind(objects, "ClusterRole") if r["metadata"]["name"] == "kc-kubecoord"]
    verbs = {(rule["apiGroups"][0], rule["resources"][0]): rule["verbs"] for rule in role["rules"]
             if rule["verbs"] != ["create"]}
    creates = {(rule["apiGroups"][0], resource) for rule in role["rules"] if rule["verbs"] == ["create"]
               for resource in rule["resources"]}
    assert creates == {("coordination.k8s.io", "leases"), ("", "configmaps"),
                       ("rbac.authorization.k8s.io", "roles"), ("rbac.authorization.k8s.io", "rolebindings")}
    assert verbs[("rbac.authorization.k8s.io", "roles")] == ["get", "list", "watch", "patch", "delete"]
    assert verbs[("kubecoord.dev", "leaderelections")] == ["get", "list", "watch", "patch"]
    assert verbs[("kubecoord.dev", "leaderelections/status")] == ["get", "patch"]
    assert not any("deletecollection" in rule["verbs"] or "escalate" in rule["verbs"] or "bind" in rule["verbs"]
                   for rule in role["rules"])
    off = render("--set", "rbac.confineOperatorWrites=false")
    assert "kc-kubecoord-operator-writes" not in [p["metadata"]["name"]
                                                  for p in by_kind(off, "ValidatingAdmissionPolicy")]


def test_the_notes_say_what_a_group_without_confinement_gets(helm: Path) -> None:
    from tests.chart.conftest import run_helm

    def notes(*args: str) -> str:
        result = run_helm(helm, "install", "kc", str(CHART), "--dry-run", "--namespace", "kubecoord-system", *args)
        assert result.returncode == 0, result.stderr
        return result.stdout.split("NOTES:", 1)[1]

    assert "Unconfined" not in notes()
    assert "Ready=False, reason Unconfined" in notes("--set", "rbac.confineGroupClients=false")
    assert "Unconfined" not in notes("--set", "rbac.confineGroupClients=false",
                                     "--set", "rbac.allowUnconfinedGroupClients=true")
