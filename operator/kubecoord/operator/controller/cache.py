"""What the controller keeps: the informer cache of the three kinds and, per resource,
what it knows between reconciles (``Entry``: no task, no thread per resource).

The bodies are kept trimmed (``trimmed``): at 10,000 resources the cache holds identities,
specs and statuses, not managedFields nor kopf's last-handled copy of the spec.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from kubecoord.api import Coordinator
from kubecoord.operator.controller.status_writer import StatusWriter
from kubecoord.operator.mirror import Mirror, Route
from kubecoord.operator.model import BackendSpec
from kubecoord.wire.crd import KINDS


@dataclass
class Entry:
    """What the controller keeps per resource between reconciles (no task, no thread)."""

    spec: dict[str, Any]
    generation: int | None
    backend: BackendSpec
    writer: StatusWriter
    conditions: list[dict[str, Any]]
    first_seen: float = field(default_factory=time.monotonic)
    coordinator: Coordinator | None = None
    mirror: Mirror | None = None
    foreign: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    """An earlier same-named resource's objects, waiting for the garbage collector."""
    last_repair: float = float("-inf")
    cached_once: bool = False
    """The watch has shown every backing object since they were last written: a missing
    one now was deleted (repair at once), not merely not seen yet (the grace applies)."""
    failures: int = 0
    routes: list[Route] = field(default_factory=list)
    """The objects whose events wake this resource (a cached mirror's; none for a handle's)."""
    uid: str | None = None
    """The resource's uid: a body of another uid is a new resource of the same name."""


KEPT_METADATA = ("name", "namespace", "uid", "generation", "resourceVersion", "deletionTimestamp", "labels",
                  "finalizers")


def trimmed(body: dict[str, Any]) -> dict[str, Any]:
    """What the controller needs of a resource (10,000 of them are cached): its identity,
    spec and status, without managedFields and kopf's last-handled annotation (a second
    copy of the spec), which are most of a body's bytes."""
    metadata = body.get("metadata") or {}
    return {
        "apiVersion": body.get("apiVersion"), "kind": body.get("kind"),
        "metadata": {key: metadata[key] for key in KEPT_METADATA if key in metadata},
        "spec": body.get("spec") or {}, "status": body.get("status") or {},
    }


def plural_of(body: dict[str, Any]) -> str | None:
    kind = body.get("kind")
    for plural, name in KINDS.items():
        if name == kind:
            return plural
    return None
