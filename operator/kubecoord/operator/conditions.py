"""Ready and BackendReachable conditions in the metav1.Condition shape.

Guarantee: ``lastTransitionTime`` changes only when a condition's status changes, so
``kubectl wait --for=condition=Ready`` and alerting on transitions behave as with
built-in resources.
"""

from __future__ import annotations

from typing import Any

from kubecoord.operator.mirror import now_rfc3339


def set_condition(
    conditions: list[dict[str, Any]] | None,
    kind: str,
    ok: bool,
    reason: str,
    message: str,
    *,
    generation: int | None = None,
) -> list[dict[str, Any]]:
    """A new list where condition ``kind`` has the given state; the others are kept."""
    status = "True" if ok else "False"
    result = [dict(condition) for condition in conditions or [] if condition.get("type") != kind]
    previous = next((c for c in conditions or [] if c.get("type") == kind), None)
    transition = previous["lastTransitionTime"] if previous and previous.get("status") == status else now_rfc3339()
    condition: dict[str, Any] = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
    }
    if generation is not None:
        condition["observedGeneration"] = generation
    result.append(condition)
    return sorted(result, key=lambda c: str(c["type"]))
