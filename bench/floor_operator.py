"""The floor for bench_scale.py's operator figures: a kopf operator that does nothing.

It watches what ``kubecoord operator`` watches — the three kubecoord CRDs, kubecoord's
Leases and the KV ConfigMaps — with handlers that return at once, so its RSS, threads
and requests are what kopf itself costs over the same objects. Run by
``bench_scale.py operator --floor`` as ``kopf run --standalone --all-namespaces``.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.watching.label_selectors["coordination.k8s.io", "leases"] = "app.kubernetes.io/managed-by=kubecoord"
    settings.watching.label_selectors["", "configmaps"] = "kubecoord.dev/store"


@kopf.on.event("kubecoord.dev", "v1alpha1", "leaderelections")
@kopf.on.event("kubecoord.dev", "v1alpha1", "groups")
@kopf.on.event("kubecoord.dev", "v1alpha1", "kvstores")
@kopf.on.event("coordination.k8s.io", "v1", "leases")
@kopf.on.event("", "v1", "configmaps")
def nothing(**_: Any) -> None:
    pass
