"""The three custom resources as the operator sees them: the one resource model
(kubecoord.resources, shared with the client binding; names in kubecoord.wire.crd) plus
what only the operator needs (owner references).
"""

from __future__ import annotations

from typing import Any

from kubecoord.resources import BackendSpec, human_bytes, size_limit_bytes
from kubecoord.wire.crd import API_VERSION

__all__ = [
    "BackendSpec",
    "human_bytes",
    "owner_reference",
    "size_limit_bytes",
]


def owner_reference(body: dict[str, Any]) -> dict[str, Any]:
    """An ownerReference to a custom resource, so Kubernetes' GC deletes what it owns."""
    return {
        "apiVersion": body.get("apiVersion", API_VERSION),
        "kind": body["kind"],
        "name": body["metadata"]["name"],
        "uid": body["metadata"]["uid"],
        "controller": True,
    }
