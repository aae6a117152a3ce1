"""Where Kubernetes credentials are found — the one rule, ``kubeconfig_to_read``:

1. an explicit kubeconfig path — always wins;
2. in a pod (KUBERNETES_SERVICE_HOST/PORT set and the service-account token present): the
   service account (token, CA, namespace file);
3. the kubeconfig at the first path of $KUBECONFIG, else ~/.kube/config.

Used by the kubernetes backend (backends/kubernetes/config.py, through the kubernetes
client's loaders; the operator resolves through it too) and the command line's one-shot
reader (cli/kubeapi.py), so that the same flags and environment pick the same
credentials in all of them.
"""

from __future__ import annotations

import os
from pathlib import Path

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Token, ca.crt and namespace of the pod's service account (client-go's rest.InClusterConfig)."""


def in_cluster(service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> bool:
    """Running in a pod: KUBERNETES_SERVICE_HOST/PORT set and the service-account token present."""
    return bool(
        os.environ.get("KUBERNETES_SERVICE_HOST")
        and os.environ.get("KUBERNETES_SERVICE_PORT")
        and (service_account_dir / "token").exists()
    )


def kubeconfig_to_read(explicit: str | None, service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> str | None:
    """The kubeconfig the rule above picks, or None for the pod's service account."""
    if explicit is not None:
        return explicit
    return None if in_cluster(service_account_dir) else default_kubeconfig()


def pod_namespace(service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> str:
    """The pod's namespace (the service account's namespace file), else "default"."""
    namespace_file = service_account_dir / "namespace"
    return namespace_file.read_text().strip() if namespace_file.exists() else "default"


def default_kubeconfig() -> str:
    """The kubeconfig used without an explicit path: the first of $KUBECONFIG, else ~/.kube/config."""
    first = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    return first or str(Path.home() / ".kube" / "config")
