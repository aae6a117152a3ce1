"""The kubecoord.dev custom resources of a namespace, read through the Kubernetes API.

Over the command's one-shot reader (kubeapi.py: the standard library, no kubernetes
client), so ``--kubeconfig``, ``--context`` and in-cluster credentials mean what they mean
for kubernetes:// (kubeapi.load_credentials resolves them as the backend does).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from kubecoord.cli import snapshot
from kubecoord.cli.exits import NotFoundError
from kubecoord.cli.kubeapi import KubeApi
from kubecoord.errors import PermissionDeniedError
from kubecoord.wire.api_status import translate_status
from kubecoord.wire.crd import GROUP, KINDS, VERSION


def _q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


class ResourceReader:
    def __init__(self, api: KubeApi) -> None:
        self._api = api
        self.namespace = api.namespace

    def _exists(self, path: str, plural: str, name: str) -> bool | None:
        """True/False by the API's answer; None when this identity may not ask (401, 403)."""
        status, body = self._api.request(path)
        if status == 404:
            return False
        if status in (401, 403):
            return None
        if status >= 400:
            raise translate_status(status, body, "get", plural, name, self.namespace)
        return True

    def _check_namespace(self) -> None:
        if self._exists(f"/api/v1/namespaces/{_q(self.namespace)}", "namespaces", self.namespace) is False:
            raise NotFoundError(f"namespace {self.namespace!r} does not exist")

    def check_declared(self, plural: str, name: str, *, lease: bool = False,
                       create: bool = False) -> dict[str, Any] | None:
        """NotFoundError unless the namespace exists and ``name`` is declared: a kubecoord.dev
        resource of that name (returned: its spec says where its data lives), or, with
        ``lease``, a Lease of that name (client-go elections declare nothing else). Without
        the CRDs nothing declares names, and nothing is refused; ``create`` accepts an
        undeclared name (the user means it). None when no resource declares it."""
        # The resource first: found, it proves the namespace too (one request, the usual case).
        try:
            return self.get(plural, name)
        except NotFoundError:
            self._check_namespace()
        except PermissionDeniedError:
            self._check_namespace()  # a missing namespace is exit 4 even for an identity without rights
            raise
        lease_seen = self._exists(snapshot.lease_path(self.namespace, name), "leases", name) if lease else False
        if lease_seen:
            return None
        try:
            declared = [str(item["metadata"]["name"]) for item in self.list(plural)]
        except NotFoundError:  # the CRDs are not installed: names are the application's own
            return None
        if create:
            return None
        if lease_seen is None:  # RBAC by name: the Lease may exist, this identity may not read it
            raise PermissionDeniedError(
                f"not allowed to get leases {name!r} in namespace {self.namespace!r} (HTTP 403), and no "
                f"{KINDS[plural]} of that name"
            )
        import difflib  # only for a name that is not declared: not on every command's start-up

        close = difflib.get_close_matches(name, declared, n=3, cutoff=0.6)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        also = " and no Lease of that name" if lease else ""
        raise NotFoundError(f"no {KINDS[plural]} {name!r} in namespace {self.namespace!r}{also}.{hint}")

    def list(self, plural: str, *, all_namespaces: bool = False) -> list[dict[str, Any]]:
        where = "all namespaces" if all_namespaces else f"namespace {self.namespace!r}"
        scope = "" if all_namespaces else f"/namespaces/{_q(self.namespace)}"
        listing = self._api.get(f"/apis/{GROUP}/{VERSION}{scope}/{plural}", verb="list", plural=f"{plural}.{GROUP}")
        if listing is None:
            raise NotFoundError(
                f"{plural}.{GROUP} is not served in {where}: are the kubecoord CRDs installed? "
                "(kubectl apply -f crds/, or the Helm chart)"
            )
        return list(listing.get("items") or [])

    def get(self, plural: str, name: str) -> dict[str, Any]:
        path = f"/apis/{GROUP}/{VERSION}/namespaces/{_q(self.namespace)}/{plural}/{_q(name)}"
        found = self._api.get(path, verb="get", plural=f"{plural}.{GROUP}", name=name)
        if found is None:
            raise NotFoundError(f"no {KINDS[plural]} {name!r} in namespace {self.namespace!r}")
        return found


def stored_in_kubernetes(resource: dict[str, Any] | None) -> bool:
    """Whether the data of a name lives in Kubernetes objects: no resource declares it (the
    backend's own objects), or its resource's spec.backend is kubernetes (the default).
    A resource of another backend (zookeeper) is read through that backend's client."""
    return resource is None or str((resource.get("spec") or {}).get("backend", "kubernetes")) == "kubernetes"
