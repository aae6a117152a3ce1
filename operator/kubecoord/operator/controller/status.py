"""A resource's status: what the controller writes to its status subresource (how it is
written: controller.status_writer).

``compose`` turns a mirror's snapshot and what the controller knows of the resource (its
spec written or not, same-named objects that are not its own, the confinement of its
clients) into the status and its conditions — BackendReachable, BackingObjects, Ready —
and ``unreachable`` into the conditions of a backend that cannot be reached.
"""

from __future__ import annotations

from typing import Any

from kubecoord.operator.conditions import set_condition
from kubecoord.operator.controller.cache import Entry
from kubecoord.operator.mirror import Snapshot


def compose(kind: str, entry: Entry, snapshot: Snapshot, reconciled: bool, generation: int | None, *,
            failure: str | None, unconfined: str | None) -> dict[str, Any]:
    """The status to write: the mirror's snapshot, observedGeneration and the conditions
    (BackendReachable, BackingObjects, Ready); ``failure``: why writing the spec last failed,
    ``unconfined``: why a Group's clients got no Lease writes. Updates ``entry.conditions``."""
    ready, reason, message = snapshot.ready
    if not reconciled:
        failure = failure or "retrying"
        ready, reason = False, "Reconciling"
        message = f"backing objects and client access not written yet: {failure}"
    conditions = set_condition(entry.conditions, "BackendReachable", True, "Connected",
                               f"{entry.backend.backend} backend reachable", generation=generation)
    if unconfined and not entry.foreign and not entry.pending:
        ready, reason, message = False, "Unconfined", unconfined
    if entry.foreign:
        conditions = set_condition(
            conditions, "BackingObjects", False, "NotOwned",
            f"{', '.join(entry.foreign)} exists and was not created for this {kind}; the operator leaves it "
            "untouched and grants nothing on it (rename the resource or remove that object)",
            generation=generation,
        )
        ready, reason, message = False, "NotOwned", f"{', '.join(entry.foreign)} is not this {kind}'s"
    elif entry.pending:
        conditions = set_condition(
            conditions, "BackingObjects", False, "Replacing",
            f"{', '.join(entry.pending)} still belongs to an earlier {kind} of this name; the operator "
            "creates this one's once the garbage collector has deleted it", generation=generation,
        )
        ready, reason, message = False, "Replacing", f"{', '.join(entry.pending)} is an earlier {kind}'s"
    elif entry.backend.backend == "kubernetes":
        conditions = set_condition(conditions, "BackingObjects", True, "Owned",
                                   "backing objects present and owned", generation=generation)
    conditions = set_condition(conditions, "Ready", ready, reason, message, generation=generation)
    entry.conditions = conditions
    return {**snapshot.status, "observedGeneration": generation, "conditions": conditions}


def unreachable(entry: Entry, error: Exception) -> list[dict[str, Any]]:
    """The conditions of a resource whose backend cannot be reached (BackendReachable and
    Ready False, with the error); updates ``entry.conditions``."""
    message = f"{type(error).__name__}: {error}"
    generation = entry.generation
    conditions = set_condition(entry.conditions, "BackendReachable", False, "BackendUnavailable", message,
                               generation=generation)
    conditions = set_condition(conditions, "Ready", False, "BackendUnavailable", message, generation=generation)
    entry.conditions = conditions
    return conditions
