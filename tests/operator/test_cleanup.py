"""Deletion never hangs on a finalizer: kubernetes-backed resources carry none (their
backing objects have ownerReferences), and the zookeeper purge gives up after a bounded
number of tries when the ensemble is gone."""

from __future__ import annotations

import socket

from kubecoord.operator.controller.finalizer import CLEANUP_RETRIES
from tests.helpers import eventually
from tests.operator.conftest import Resources

FINALIZER = "kubecoord.dev/cleanup"


def _finalizers(resources: Resources, plural: str, name: str) -> list[str]:
    body = resources.get(plural, name) or {}
    return list(body.get("metadata", {}).get("finalizers") or [])


def test_kubernetes_backed_resources_need_no_finalizer(resources: Resources, unique: str) -> None:
    name = f"nofin-{unique}"
    resources.create("leaderelections", "LeaderElection", name, {})
    resources.wait_ready("leaderelections", name)
    assert FINALIZER not in _finalizers(resources, "leaderelections", name)
    resources.delete("leaderelections", name)
    eventually(lambda: resources.get("leaderelections", name) is None, timeout=20)


def test_a_dead_ensemble_does_not_block_deletion_forever(resources: Resources, unique: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once the socket is closed
    name = f"deadzk-{unique}"
    spec = {"backend": "zookeeper", "zookeeper": {"hosts": [f"127.0.0.1:{port}"], "sessionTimeoutSeconds": 2}}
    resources.create("kvstores", "KVStore", name, spec)
    eventually(lambda: FINALIZER in _finalizers(resources, "kvstores", name), timeout=20)
    resources.delete("kvstores", name)
    # CLEANUP_RETRIES tries (each failing at once: connection refused), CLEANUP_BACKOFF_SECONDS apart.
    eventually(lambda: resources.get("kvstores", name) is None, timeout=20 + 15 * CLEANUP_RETRIES)
