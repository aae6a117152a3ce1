"""What the API server's per-kind strategies add to the generic registry: the metadata
and status that namespaces and CRDs get on create, when an object's generation moves, and
which finalizers hold a deletion."""

from __future__ import annotations

import datetime
from typing import Any

from kubecoord_testkit.emulator import status
from kubecoord_testkit.emulator.resources import CRD_KEY, NAMESPACE_KEY, ResourceType

JSON = dict[str, Any]
CRD_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
NAMESPACE_FINALIZER = "kubernetes"


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def prepare_create(rtype: ResourceType, obj: JSON) -> None:
    """What the built-in strategies of namespaces and CRDs add on create."""
    if rtype.key == NAMESPACE_KEY:
        obj.setdefault("spec", {}).setdefault("finalizers", [NAMESPACE_FINALIZER])
        obj["status"] = {"phase": "Active"}
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
    elif rtype.key == CRD_KEY:
        check_crd(obj)
        finalizers = obj["metadata"].setdefault("finalizers", [])
        if CRD_FINALIZER not in finalizers:
            finalizers.append(CRD_FINALIZER)
        # Established synchronously: the real API server takes a moment to serve it.
        names = obj["spec"]["names"]
        accepted = {
            **names,
            "singular": names.get("singular") or names["kind"].lower(),
            "listKind": names.get("listKind") or names["kind"] + "List",
        }
        stamp = now()
        obj["status"] = {
            "acceptedNames": accepted,
            "storedVersions": [v["name"] for v in obj["spec"]["versions"] if v.get("storage")],
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                    "lastTransitionTime": stamp,
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": stamp,
                },
            ],
        }


def blocking_finalizers(rtype: ResourceType, obj: JSON) -> bool:
    if obj["metadata"].get("finalizers"):
        return True
    return rtype.key == NAMESPACE_KEY and bool((obj.get("spec") or {}).get("finalizers"))


def spec_changed(rtype: ResourceType, old: JSON, new: JSON) -> bool:
    """Whether metadata.generation moves: custom resources bump on any change outside
    metadata (and status, when it is a subresource); built-ins only where they have a
    status subresource, on a change of spec."""
    if rtype.custom:
        ignored = {"metadata", "apiVersion", "kind"} | ({"status"} if rtype.has_status else set())
        return {k: v for k, v in old.items() if k not in ignored} != {k: v for k, v in new.items() if k not in ignored}
    return rtype.has_status and old.get("spec") != new.get("spec")


def check_crd(crd: JSON) -> None:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    name = crd["metadata"].get("name", "")
    causes = []
    if not names.get("plural") or not names.get("kind"):
        causes.append(("spec.names", "FieldValueRequired", "spec.names.plural and spec.names.kind: Required value"))
    elif name != f"{names['plural']}.{spec.get('group', '')}":
        causes.append(
            (
                "metadata.name",
                "FieldValueInvalid",
                f'metadata.name: Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
            )
        )
    versions = spec.get("versions") or []
    if not versions:
        causes.append(
            (
                "spec.versions",
                "FieldValueRequired",
                "spec.versions: Invalid value: must have exactly one version marked as storage version",
            )
        )
    elif sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(
            (
                "spec.versions",
                "FieldValueInvalid",
                "spec.versions: Invalid value: must have exactly one version marked as storage version",
            )
        )
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(
            (
                "spec.scope",
                "FieldValueNotSupported",
                f'spec.scope: Unsupported value: "{spec.get("scope")}": supported values: "Cluster", "Namespaced"',
            )
        )
    if causes:
        raise status.invalid("CustomResourceDefinition", "apiextensions.k8s.io", name, causes)
