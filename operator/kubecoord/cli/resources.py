"""The kubecoord.dev custom resources of a namespace, read through the Kubernetes API.

The one module of the command that imports the kubernetes client (import-linter allows
it here); the configuration comes from the backend's own loader (the public
``kubecoord.backends.kubernetes.load_config``), so ``--kubeconfig``, ``--context`` and
in-cluster credentials mean the same as for kubernetes://.
"""

from __future__ import annotations

import difflib
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
        client = k8s.ApiClient(config.configuration)
        self._api = k8s.CustomObjectsApi(client)
        self._core = k8s.CoreV1Api(client)
        self._coordination = k8s.CoordinationV1Api(client)
        self._timeout = timeout

    def _timeouts(self) -> tuple[float, float]:
        return (min(3.0, self._timeout), self._timeout)

    def _exists(self, read: Any, *args: Any) -> bool | None:
        """True/False by the API's answer; None when this identity may not ask (403)."""
        try:
            read(*args, _preload_content=False, _request_timeout=self._timeouts())
        except k8s.ApiException as exc:
            if exc.status == 404:
                return False
            if exc.status in (401, 403):
                return None
            raise translate_status(exc.status, exc.body, "get", str(args[0]), None, self.namespace) from None
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise BackendUnavailableError(f"cannot reach the API server: {type(exc).__name__}: {exc}") from None
        return True

    def check_declared(self, plural: str, name: str, *, lease: bool = False, create: bool = False) -> None:
        """NotFoundError unless the namespace exists and ``name`` is declared: a kubecoord.dev
        resource of that name (or, with ``lease``, a Lease of that name: client-go
        elections declare nothing else). Without the CRDs nothing declares names, and
        nothing is refused; ``create`` accepts an undeclared name (the user means it)."""
        if self._exists(self._core.read_namespace, self.namespace) is False:
            raise NotFoundError(f"namespace {self.namespace!r} does not exist")
        try:
            self.get(plural, name)
            return
        except NotFoundError:
            pass
        if lease and self._exists(self._coordination.read_namespaced_lease, name, self.namespace):
            return
        try:
            declared = [str(item["metadata"]["name"]) for item in self.list(plural)]
        except NotFoundError:  # the CRDs are not installed: names are the application's own
            return
        if create:
            return
        close = difflib.get_close_matches(name, declared, n=3, cutoff=0.6)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        also = " and no Lease of that name" if lease else ""
        raise NotFoundError(f"no {KINDS[plural]} {name!r} in namespace {self.namespace!r}{also}.{hint}")

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
