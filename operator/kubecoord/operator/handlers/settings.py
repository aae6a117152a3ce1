"""Operator-wide kopf settings: where kopf keeps its own bookkeeping.

kopf's progress and last-handled state go to annotations under kubecoord.dev, not to
``status.kopf``: the CRDs' status schema does not have that field and the API server
would prune it. Events are posted with the operator's name as their source component.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from kubecoord.operator.controller.status import controller
from kubecoord.wire import object_names
from kubecoord.wire.crd import GROUP


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    # spec.assignment is left out of the last-handled copy: it is immutable (CEL), so no
    # diff ever needs it, and a Group's 4,096 unitNames of 128 characters would put the
    # annotations over the API server's 256 KiB limit (the Group could never be handled).
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration", ignored_fields=["spec.assignment"]
    )
    settings.posting.level = logging.WARNING  # explicit Events only; handler logs stay logs
    settings.peering.standalone = True  # HA is kubecoord's own Lease election (kubecoord.operator.ha)
    settings.watching.server_timeout = 300
    # Server-side filtering: the member-Lease handler (group.py) needs only Leases that
    # carry the group label, so kopf never streams other applications' Leases (node
    # heartbeats, controllers' locks) into the operator.
    settings.watching.label_selectors["coordination.k8s.io", "leases"] = object_names.GROUP_LABEL
    settings.persistence.finalizer = f"{GROUP}/cleanup"


@kopf.on.startup()
async def start_controller(**_: Any) -> None:
    """The status controller's workers run on kopf's loop, from before the first watch event."""
    await controller.start()


@kopf.on.cleanup()
async def stop_controller(**_: Any) -> None:
    await controller.stop()


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In a pod: the service account; elsewhere: $KUBECONFIG (kopf's built-in readers).

    Declared so that kopf does not also try the kubernetes client's default loader, which
    reads ~/.kube/config rather than the kubeconfig the operator was given.
    """
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)
