"""The status controller's resource cache (controller/status.py, observe): the watch event
that echoes the controller's own status write keeps its conditions once, shared with
what the controller wrote, not as a second parsed copy."""

from __future__ import annotations

import copy
from typing import Any

from kubecoord.operator.controller.reconciler import StatusController


def _body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "kubecoord.dev/v1alpha1", "kind": "Group",
        "metadata": {"name": "g", "namespace": "ns", "uid": "u1", "generation": 1, "resourceVersion": "10",
                     "labels": {"team": "a"}, "managedFields": [{"manager": "kubectl"}]},
        "spec": {"leaseDurationSeconds": 6}, "status": {},
    }
    for path, value in changes.items():
        target = body
        *parents, leaf = path.split(".")
        for parent in parents:
            target = target[parent]
        target[leaf] = value
    return body


def test_the_echoed_conditions_are_kept_once() -> None:
    """The cached body's conditions are the very list the controller wrote (one copy a
    resource, not two), and only when they are equal to it."""
    from kubecoord.operator.controller.cache import Entry
    from kubecoord.operator.controller.status_writer import StatusWriter
    from kubecoord.operator.model import BackendSpec

    key = ("groups", "ns", "g")
    written = [{"type": "Ready", "status": "True", "reason": "Mirroring", "message": "m",
                "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}]
    controller = StatusController()
    controller.observe("ADDED", _body())
    controller.entries[key] = Entry({}, 1, BackendSpec.from_spec({}, namespace="ns"),
                                     StatusWriter("Group", key), written)
    controller.observe("MODIFIED", _body(**{"metadata.resourceVersion": "11",
                                            "status": {"conditions": copy.deepcopy(written)}}))
    assert controller.bodies[key]["status"]["conditions"] is written
    other = copy.deepcopy(written)
    other[0]["status"] = "False"
    controller.observe("MODIFIED", _body(**{"metadata.resourceVersion": "12", "status": {"conditions": other}}))
    assert controller.bodies[key]["status"]["conditions"] == other
    assert controller.bodies[key]["status"]["conditions"] is not written
