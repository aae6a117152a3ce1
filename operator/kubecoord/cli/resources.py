"""The kubecoord.dev custom resources of a namespace, read through the Kubernetes API.

The one module of the command that imports the kubernetes client (import-linter allows
it here); the configuration comes from the backend's own loader (the public
``kubecoord.backends.kubernetes.load_config``), so ``--kubeconfig``, ``--context`` and
in-cluster credentials mean the same as for kubernetes://.
"""

from __future__ import annotations

import json
from typing import Any

import urllib3
from kubernetes import client as k8s

from kubecoord.backends.kubernetes import load_config, translate_status
from kubecoord.cli.exits import NotFoundError
from kubecoord.errors import BackendUnavailableError
from kubecoord.wire.crd import GROUP, KINDS, VERSION


class ResourceReader:
    def __init__(self, namespace: str, *, kubeconfig: str | None, context: str | None, timeout: float) -> None:
        config = load_config(namespace, kubeconfig=kubeconfig, context=context)
        self.namespace = config.namespace
        self._api = k8s.CustomObjectsApi(k8s.ApiClient(config.configuration))
        self._timeout = timeout

    def list(self, plural: str, *, all_namespaces: bool = False) -> list[dict[str, Any]]:
        common: dict[str, Any] = {
            "_preload_content": False,
            "_request_timeout": (min(3.0, self._timeout), self._timeout),
        }
        where = "all namespaces" if all_namespaces else f"namespace {self.namespace!r}"
        response: Any
        try:
            if all_namespaces:
                response = self._api.list_cluster_custom_object(GROUP, VERSION, plural, **common)
            else:
                response = self._api.list_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, **common)
        except k8s.ApiException as exc:
            if exc.status == 404:
                raise NotFoundError(
                    f"{plural}.{GROUP} is not served in {where}: are the kubecoord CRDs installed? "
                    "(kubectl apply -f crds/, or the Helm chart)"
                ) from None
            raise translate_status(exc.status, exc.body, "list", f"{plural}.{GROUP}", None, self.namespace) from None
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise BackendUnavailableError(
                f"cannot list {plural}.{GROUP} in {where}: {type(exc).__name__}: {exc}"
            ) from None
        return list(json.loads(response.data or b"{}").get("items") or [])

    def get(self, plural: str, name: str) -> dict[str, Any]:
        response: Any
        try:
            response = self._api.get_namespaced_custom_object(
                GROUP,
                VERSION,
                self.namespace,
                plural,
                name,
                _preload_content=False,
                _request_timeout=(min(3.0, self._timeout), self._timeout),
            )
        except k8s.ApiException as exc:
            if exc.status == 404:
                raise NotFoundError(f"no {KINDS[plural]} {name!r} in namespace {self.namespace!r}") from None
            raise translate_status(exc.status, exc.body, "get", f"{plural}.{GROUP}", name, self.namespace) from None
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise BackendUnavailableError(
                f"cannot get {plural}.{GROUP} {name!r}: {type(exc).__name__}: {exc}"
            ) from None
        return dict(json.loads(response.data or b"{}"))
