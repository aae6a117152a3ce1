"""Where Kubernetes credentials are found: a pod's service account, else the kubeconfig.

Shared by the kubernetes backend (backends/kubernetes/config.py, through the kubernetes
client's loaders) and the command line's one-shot reader (cli/kubeapi.py, standard
library only), so that the same flags and environment pick the same credentials in both.
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


def default_kubeconfig() -> str:
    """The kubeconfig used without an explicit path: the first of $KUBECONFIG, else ~/.kube/config."""
    first = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    return first or str(Path.home() / ".kube" / "config")
