"""Where the API server is and who we are: in-cluster service account, else a kubeconfig.

Order: kubecoord.wire.kube_credentials' one rule (the same as client-go's
rest.InClusterConfig fallback in most controllers) — an explicit ``kubeconfig`` path
(connect option); else in a pod the service account: the token (re-read when it rotates,
by the kubernetes client's InClusterConfigLoader), the cluster CA and the namespace file;
else the kubeconfig at $KUBECONFIG or ~/.kube/config, with its current (or the given)
context.

The namespace is the URL's (kubernetes://NAMESPACE); kubernetes:// alone means the pod's
namespace in a cluster, else the kubeconfig context's, else "default".

What is resolved is a kubernetes Configuration (the official client's loaders do the
reading: kubeconfig, exec plugins, the in-cluster token and its refresh hook, TLS files);
requests go through transport.py, which sends each once whatever the Configuration's
``retries`` says. The TLS files the Configuration names (the CA that checks the server,
the client certificate) hold on both of the transport's faces alike; no environment
variable replaces them — not REQUESTS_CA_BUNDLE, not pykube-ng's
PYKUBE_SSL_CERTIFICATE_AUTHORITY.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from kubecoord.errors import InvalidArgumentError
from kubecoord.wire.kube_credentials import SERVICE_ACCOUNT_DIR, kubeconfig_to_read, pod_namespace


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    configuration: k8s.Configuration
    namespace: str
    source: str
    """"in-cluster" or the kubeconfig path."""


def load(
    namespace: str = "",
    *,
    kubeconfig: str | os.PathLike[str] | None = None,
    context: str | None = None,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
) -> ClusterConfig:
    """Resolve the configuration as the module docstring says; InvalidArgumentError if none."""
    path = kubeconfig_to_read(None if kubeconfig is None else str(kubeconfig), service_account_dir)
    if path is None:
        configuration = k8s.Configuration()
        loader = k8s_config.incluster_config.InClusterConfigLoader(  # type: ignore[no-untyped-call]
            token_filename=str(service_account_dir / "token"),
            cert_filename=str(service_account_dir / "ca.crt"),
        )
        try:
            loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
        except ConfigException as exc:
            raise InvalidArgumentError(f"kubernetes backend: bad in-cluster configuration: {exc}") from None
        return ClusterConfig(configuration, namespace or pod_namespace(service_account_dir), "in-cluster")

    configuration = k8s.Configuration()
    try:
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=path, context=context, client_configuration=configuration, persist_config=False
        )
        if not namespace:
            contexts, current = k8s_config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
            chosen = next((c for c in contexts if c.get("name") == context), current) if context else current
            namespace = ((chosen or {}).get("context") or {}).get("namespace") or "default"
    except (ConfigException, OSError, TypeError, ValueError, KeyError, yaml.YAMLError) as exc:
        raise InvalidArgumentError(f"kubernetes backend: cannot load kubeconfig {path!r}: {exc}") from None
    return ClusterConfig(configuration, namespace, path)

