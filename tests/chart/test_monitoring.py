"""Operations built into the chart: the ServiceMonitor scrapes the metrics Service, the
PrometheusRule's alerts and the Grafana dashboard read metrics the operator exports, and
everything is off by default."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

import kubecoord.operator.metrics  # noqa: F401  (registers the operator's metrics)
from tests.chart.conftest import CHART, Render, by_kind, run_helm

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"

MONITORING = ("--set", "serviceMonitor.enabled=true", "--set", "prometheusRule.enabled=true",
              "--set", "dashboards.enabled=true")


def _exported() -> set[str]:
    """Every sample name the operator's registry can expose (counters' _total, histograms' _bucket...)."""
    names: set[str] = set()
    for metric in REGISTRY.collect():
        if metric.name.startswith("kubecoord_operator_"):
            suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}.get(metric.type, [""])
            names.update(metric.name + suffix for suffix in suffixes)
    return names


def _metrics_in(expression: str) -> set[str]:
    return set(re.findall(r"\b(kubecoord_[a-z_]+)\b", expression))


def test_monitoring_is_off_by_default(render: Render) -> None:
    kinds = {obj["kind"] for obj in render()}
    assert not kinds & {"ServiceMonitor", "PrometheusRule"}
    assert not [cm for cm in by_kind(render(), "ConfigMap") if "dashboard" in cm["metadata"]["name"]]


def test_service_monitor_selects_the_metrics_service_port(render: Render) -> None:
    objects = render(*MONITORING, "--set", "serviceMonitor.labels.release=prom")
    (monitor,) = by_kind(objects, "ServiceMonitor")
    (service,) = by_kind(objects, "Service")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
    # The metrics' own namespace/name labels must survive the scrape (the alerts group by them).
    assert endpoint["honorLabels"] is True


@pytest.mark.parametrize("flag", ["serviceMonitor.enabled=true", "prometheusRule.enabled=true"])
def test_monitoring_without_metrics_is_refused(helm: Path, flag: str) -> None:
    result = run_helm(helm, "template", "kc", str(CHART), "--set", flag, "--set", "metrics.enabled=false")
    assert result.returncode != 0 and "needs metrics.enabled" in result.stderr


def test_alerts_read_metrics_the_operator_exports(render: Render) -> None:
    objects = render(*MONITORING, "--set", "prometheusRule.leaderlessLeaseDurations=4",
                     "--set", "prometheusRule.alertLabels.team=platform")
    (rule,) = by_kind(objects, "PrometheusRule")
    (service,) = by_kind(objects, "Service")
    rules = {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}
    assert set(rules) == {"KubecoordNoLeader", "KubecoordFrequentFailovers", "KubecoordMemberChurn",
                          "KubecoordReconcileErrors", "KubecoordOperatorNotLeading"}
    exported = _exported()
    job = f'job="{service["metadata"]["name"]}"'
    for name, alert in rules.items():
        used = _metrics_in(alert["expr"])
        assert used and used <= exported, (name, used - exported)
        # Every selector is confined to this release's metrics (one release, one alert).
        assert alert["expr"].count("{") == alert["expr"].count(job), name
        assert alert["labels"]["severity"] in {"warning", "critical"} and alert["labels"]["team"] == "platform"
        assert "{{" not in alert["annotations"]["description"]
    assert "> 4 * kubecoord_operator_lease_duration_seconds" in rules["KubecoordNoLeader"]["expr"]
    # Each alert links its runbook: a section of docs/operations.md that exists.
    headings = {line.lstrip("#").strip().lower() for line in OPERATIONS.read_text().splitlines()
                if line.startswith("#")}
    for name, alert in rules.items():
        page, _, anchor = alert["annotations"]["runbook_url"].partition("#")
        assert page == "https://github.com/kubecoord/kubecoord/blob/main/docs/operations.md", name
        assert anchor == name.lower() and anchor in headings, name
    # Prometheus's own template syntax reaches Prometheus unrendered by Helm.
    assert "{{ $labels.namespace }}" in rules["KubecoordNoLeader"]["annotations"]["summary"]


def test_dashboard_configmap_for_the_grafana_sidecar(render: Render) -> None:
    objects = render(*MONITORING, "--set", "dashboards.namespace=monitoring",
                     "--set", "dashboards.annotations.grafana_folder=kubecoord")
    (configmap,) = [cm for cm in by_kind(objects, "ConfigMap") if cm["metadata"]["name"].endswith("-dashboard")]
    assert configmap["metadata"]["namespace"] == "monitoring"
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["metadata"]["annotations"] == {"grafana_folder": "kubecoord"}
    dashboard = json.loads(configmap["data"]["kubecoord.json"])
    assert dashboard == json.loads((CHART / "dashboards" / "kubecoord.json").read_text())
    assert dashboard["uid"] and dashboard["title"] == "kubecoord"
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    exported = _exported()
    for panel in panels:
        assert panel["title"] and panel["description"], panel["id"]
        for target in panel["targets"]:
            used = _metrics_in(target["expr"])
            assert used and used <= exported, (panel["title"], used - exported)
    assert any("leader_present" in t["expr"] for p in panels for t in p["targets"])


def test_dashboard_label_follows_the_sidecar_convention_values(render: Render) -> None:
    objects = render("--set", "dashboards.enabled=true", "--set", "dashboards.label=my_dashboards",
                     "--set-string", "dashboards.labelValue=yes")
    (configmap,) = [cm for cm in by_kind(objects, "ConfigMap") if cm["metadata"]["name"].endswith("-dashboard")]
    assert configmap["metadata"]["labels"]["my_dashboards"] == "yes"
    assert configmap["metadata"]["namespace"] == "kubecoord-system"


def _admission(objects: list[dict[str, Any]]) -> set[str]:
    return {obj["apiVersion"] for obj in objects if obj["kind"].startswith("ValidatingAdmissionPolicy")}


@pytest.mark.parametrize(
    ("kube_version", "api_versions", "expected"),
    [
        ("1.30.0", [], {"admissionregistration.k8s.io/v1"}),
        ("1.32.0", [], {"admissionregistration.k8s.io/v1"}),
        # 1.28-1.29: v1beta1 only where the cluster serves it (an opt-in beta there).
        ("1.29.4", ["admissionregistration.k8s.io/v1beta1/ValidatingAdmissionPolicy"],
         {"admissionregistration.k8s.io/v1beta1"}),
        ("1.29.4", [], set()),
        ("1.28.0", [], set()),
    ],
)
def test_admission_policy_api_version_follows_the_kubernetes_version(
    render: Render, helm: Path, kube_version: str, api_versions: list[str], expected: set[str]
) -> None:
    extra = [arg for version in api_versions for arg in ("--api-versions", version)]
    objects = render("--kube-version", kube_version, *extra)
    assert _admission(objects) == expected
    # NOTES.txt and the manifest itself (for `helm template | kubectl apply`) say when it is left out.
    result = run_helm(helm, "template", "kc", str(CHART), "--kube-version", kube_version, *extra,
                      "--show-only", "templates/admissionpolicy.yaml")
    assert result.returncode == 0, result.stderr
    warned = f"# WARNING: rbac.confineGroupClients is true, but this cluster (Kubernetes v{kube_version})"
    assert (warned in result.stdout) == (not expected), result.stdout
    assert "The policy was NOT installed" not in run_helm(
        helm, "template", "kc", str(CHART), "--kube-version", kube_version, "--set", "rbac.confineGroupClients=false"
    ).stdout


def test_kubernetes_below_the_charts_minimum_is_refused(helm: Path) -> None:
    result = run_helm(helm, "template", "kc", str(CHART), "--kube-version", "1.27.9")
    assert result.returncode != 0 and "kubeVersion" in result.stderr


def test_notes_say_how_to_get_an_image_until_one_is_published(helm: Path) -> None:
    default = run_helm(helm, "install", "kc", str(CHART), "--dry-run=client")
    assert default.returncode == 0, default.stderr
    assert "No kubecoord image is published yet" in default.stdout
    assert "docker build" in default.stdout and "kind load docker-image kubecoord/operator:" in default.stdout
    own = run_helm(helm, "install", "kc", str(CHART), "--dry-run=client", "--set", "image.repository=reg.example/kc")
    assert "No kubecoord image is published yet" not in own.stdout
    # The default (recent) Kubernetes serves the policy: no warning.
    assert "The policy was NOT installed" not in default.stdout
