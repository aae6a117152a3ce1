"""Generate the chart's CRD templates from crds/, the single source of the CRDs.

Helm installs a chart's crds/ folder once and never upgrades it, so the chart renders
its CRDs from templates instead (as cert-manager does), behind the values crds.enabled
(render them at all) and crds.keep (annotate them helm.sh/resource-policy: keep, so that
`helm uninstall` does not delete every custom resource with them). This script writes
charts/kubecoord/templates/crds/NAME.yaml for each crds/NAME.yaml: the same apiVersion,
kind, name and spec, the chart's labels added, and any "{{" escaped for Go templates.

Usage: python charts/scripts/generate_crds.py [--check]
  --check  write nothing; exit 1 if a template is missing, stale or has no source
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "crds"
TARGET = ROOT / "charts" / "kubecoord" / "templates" / "crds"
# Labels kubecoord.crdLabels sets; a source label with one of these keys is left to it.
CHART_LABELS = {
    "helm.sh/chart",
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/component",
}


def _escape(text: str) -> str:
    """Make text literal for Go templates: "{{" would open an action."""
    return text.replace("{{", '{{ "{{" }}')


def _dump(value: Any, indent: int) -> str:
    text = yaml.safe_dump(value, sort_keys=False, allow_unicode=True, width=1_000_000, default_flow_style=False)
    pad = " " * indent
    return "".join(pad + line if line.strip() else line for line in _escape(text).splitlines(keepends=True))


def render(source: Path) -> str:
    crd = yaml.safe_load(source.read_text(encoding="utf-8"))
    if not isinstance(crd, dict) or crd.get("kind") != "CustomResourceDefinition":
        raise SystemExit(f"{source}: not a CustomResourceDefinition")
    metadata = crd["metadata"]
    labels = {k: v for k, v in (metadata.get("labels") or {}).items() if k not in CHART_LABELS}
    annotations = metadata.get("annotations") or {}
    lines = [
        f'{{{{- if include "kubecoord.rendersCrd" (list . "{metadata["name"]}") }}}}',
        f"# GENERATED from crds/{source.name} by charts/scripts/generate_crds.py: edit the source, then run",
        "# `make chart-crds`. A test checks that the rendered CRD equals the source.",
        f"apiVersion: {crd['apiVersion']}",
        f"kind: {crd['kind']}",
        "metadata:",
        f"  name: {metadata['name']}",
        "  labels:",
        '    {{- include "kubecoord.crdLabels" . | nindent 4 }}',
    ]
    if labels:
        lines.append(_dump(labels, 4).rstrip("\n"))
    keep = ["{{- if .Values.crds.keep }}", "helm.sh/resource-policy: keep", "{{- end }}"]
    if annotations:
        lines += ["  annotations:", *("    " + line for line in keep), _dump(annotations, 4).rstrip("\n")]
    else:
        lines += ["  " + keep[0], "  annotations:", "    " + keep[1], "  " + keep[2]]
    lines.append("spec:")
    lines.append(_dump(crd["spec"], 2).rstrip("\n"))
    lines.append("{{- end }}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv[1:]
    sources = sorted(SOURCE.glob("*.yaml"))
    if not sources:
        raise SystemExit(f"no CRDs in {SOURCE}")
    wanted = {TARGET / source.name: render(source) for source in sources}
    problems = []
    for path, text in wanted.items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if check:
            problems.append(f"{path.relative_to(ROOT)} is {'stale' if current else 'missing'}")
        else:
            TARGET.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    for path in sorted(TARGET.glob("*.yaml")):
        if path not in wanted:
            if check:
                problems.append(f"{path.relative_to(ROOT)} has no source in crds/")
            else:
                path.unlink()
                print(f"removed {path.relative_to(ROOT)}")
    if problems:
        print("\n".join(problems) + "\nrun `make chart-crds`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
