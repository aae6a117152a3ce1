"""Operator-wide kopf settings: kopf watches, the controller does the work.

kopf runs no create/update/resume/delete handler here (the status controller writes
what a spec asks for, kubecoord.operator.controller.spec), so it keeps no state on the
objects: no progress or last-handled annotation, no finalizer of its own (the
controller's, ``kubecoord.dev/cleanup``, is a different name, so kopf never removes it as
"not needed"). Its diff base is not even built: kopf would deep-copy every body of every
watch event to compute a diff nothing reads. Events are posted with the operator's name
as their source component.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import kopf

from kubecoord.operator import kubeapi
from kubecoord.operator.controller.reconciler import controller
from kubecoord.wire import object_names
from kubecoord.wire.crd import GROUP
from kubecoord.wire.kube_credentials import kubeconfig_to_read


class NoDiffBase(kopf.DiffBaseStorage):
    """No essence, no stored copy: only event handlers are registered, nothing diffs."""

    def build(self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None) -> Any:
        return None

    def fetch(self, *, body: kopf.Body) -> Any:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: Any) -> None:
        return None


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.posting.level = logging.WARNING  # explicit Events only; handler logs stay logs
    settings.peering.standalone = True  # HA is kubecoord's own Lease election (kubecoord.operator.ha)
    settings.watching.server_timeout = 300
    # Server-side filtering: the member-Lease handler (group.py) needs only Leases that
    # carry the group label, so kopf never streams other applications' Leases (node
    # heartbeats, controllers' locks) into the operator.
    settings.watching.label_selectors["coordination.k8s.io", "leases"] = object_names.GROUP_LABEL
    # Not the controller's finalizer (controller.spec.FINALIZER): kopf removes its own
    # finalizer from objects no handler of its needs, and none does.
    settings.persistence.finalizer = f"{GROUP}/kopf-unused"


@kopf.on.startup()
async def start_controller(**_: Any) -> None:
    """The status controller's workers run on kopf's loop, from before the first watch event."""
    await controller.start()


@kopf.on.cleanup()
async def stop_controller(**_: Any) -> None:
    await controller.stop()


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """kopf's credentials by the operator's one rule (kubeapi.kubeconfig, load_config): its
    kubeconfig when it has one, else the pod's service account, else ~/.kube/config
    (kopf's built-in readers of each).

    Declared so that kopf does not pick by its own order (the service account first, even
    when the operator was given a kubeconfig) or try the kubernetes client's default loader.
    """
    if kubeconfig_to_read(kubeapi.kubeconfig()) is None:
        return kopf.login_with_service_account(**kwargs)
    return kopf.login_with_kubeconfig(**kwargs)
