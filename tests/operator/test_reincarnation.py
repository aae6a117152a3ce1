"""A resource deleted and created again under its name before the controller looked at
the deletion (kubecoord.operator.controller.reconciler): both watch events reach the
cache before one reconcile runs, so that reconcile meets a body whose uid is not the one
it knows. It must treat it as a new resource — the old one's clean-up first, then the
new one's backing objects, client Role and status — never as the old one continued.

The operator runs in this process (tests/operator/conftest.py); the one reconcile is held
at its start while the Group is deleted and created again, which is what a busy operator
does on its own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from kubecoord.operator.controller.reconciler import StatusController, controller
from kubecoord.wire.group_record import derived_name
from tests.helpers import eventually
from tests.operator.conftest import NAMESPACE, Resources


class HeldReconcile:
    """Holds the reconciles of one key at their start while ``held`` is set."""

    def __init__(self, target: StatusController, key: tuple[str, str, str]) -> None:
        self.key, self.held, self.waiting = key, threading.Event(), threading.Event()
        self._reconcile = target._reconcile

    async def __call__(self, key: tuple[str, str, str]) -> float | None:
        if key == self.key and self.held.is_set():
            self.waiting.set()
            while self.held.is_set():
                await asyncio.sleep(0.02)
        return await self._reconcile(key)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch, unique: str) -> Iterator[HeldReconcile]:
    hold = HeldReconcile(controller, ("groups", NAMESPACE, f"again-{unique}"))
    monkeypatch.setattr(controller, "_reconcile", hold)
    try:
        yield hold
    finally:
        hold.held.clear()


def _uid(resources: Resources, name: str) -> str:
    body: dict[str, Any] = resources.get("groups", name) or {}
    return str(body.get("metadata", {}).get("uid"))


def _owner_uids(resources: Resources, name: str) -> list[set[str]]:
    """The ownerReference uids of the Group's coordinator Lease, its ConfigMap and its client Role."""
    lease = resources.coordination.read_namespaced_lease(derived_name(name), NAMESPACE)
    configmap = resources.core.read_namespaced_config_map(f"kubecoord-kv.{derived_name(name)}", NAMESPACE)
    role = resources.rbac.read_namespaced_role(f"kubecoord-group-{name}", NAMESPACE)
    return [{ref.uid for ref in obj.metadata.owner_references or []} for obj in (lease, configmap, role)]


def _has_owners(resources: Resources, name: str, uid: str) -> bool:
    try:
        return _owner_uids(resources, name) == [{uid}] * 3
    except ApiException as error:
        if error.status != 404:  # one not there (yet)
            raise
        return False


def test_a_group_deleted_and_created_before_a_reconcile_is_reconciled_as_new(
    resources: Resources, held: HeldReconcile
) -> None:
    name = held.key[2]
    resources.create("groups", "Group", name, {"clients": ["app"]})
    resources.wait_ready("groups", name)
    old = _uid(resources, name)
    eventually(lambda: _has_owners(resources, name, old), timeout=30, interval=0.1)

    held.held.set()
    resources.delete("groups", name)
    assert held.waiting.wait(30), "the deletion never reached a reconcile"
    eventually(lambda: resources.get("groups", name) is None, timeout=30, interval=0.05)
    resources.create("groups", "Group", name, {"clients": ["app"]})
    new = _uid(resources, name)
    assert new != old
    # Both events are in the cache now; the held reconcile sees only the new body.
    eventually(lambda: controller.bodies.get(held.key, {}).get("metadata", {}).get("uid") == new,
               timeout=30, interval=0.05)
    held.held.clear()

    # The new Group's own objects and Role, and a status written for it.
    eventually(lambda: _has_owners(resources, name, new), timeout=30, interval=0.1)
    resources.wait_ready("groups", name)
    resources.delete("groups", name)
