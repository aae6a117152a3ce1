"""The operator's own Kubernetes API calls (status, owned objects, RBAC), through the
Kubernetes floor's one client (kubecoord.backends.kubernetes.Transport) built from the
backend's one credential rule (kubecoord.backends.kubernetes.load_config): the operator's
kubeconfig (``--kubeconfig``, else $KUBECONFIG) when it has one, else the pod's service
account (its token re-read when it rotates), else ~/.kube/config. kopf's login
(handlers/settings.py) and every backend connection the operator opens (connections.py)
follow the same rule. The blocking one-shot calls (start-up checks, access reviews, term
probes, connection Secrets) go through the transport's blocking face (``call``:
pykube-ng's HTTPClient); on the event loop, through its asynchronous face (``acall``:
aiohttp, no executor thread per request, so the controller's workers each keep a request
in flight). The operator's clients are kopf's and this one.

Guarantees: no call blocks the event loop (a blocking call runs in a thread) and every
call has a request timeout — a write's is kubecoord.operator.fencing's ``write_timeout`` (within the operator
Lease's term), a read's REQUEST_TIMEOUT — and a write is sent once (the transport makes no
retry; a retry is the work queue's, and asks the fencing check again); a read is sent a
second time only when its connection closed before answering; a write carries the fencing's headers
(with ``--fence-writes``, this replica's term: kubecoord.operator.term), a read none; ``apply`` creates an object or
merge-patches the fields the operator owns, so reconciling twice is a no-op; 404 on
delete counts as done. Errors are the official client's ApiException type with ``status`` set
(RequestFailed for an answer outside 2xx, which says in one line what was asked — verb
and path — and what the API answered, without the response headers); a transport failure
is an OSError (the transport's TransportError, which says whether the request was sent).
"""

from __future__ import annotations

import json
import os
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from kubecoord.backends.kubernetes import Transport, load_config
from kubecoord.operator import fencing
from kubecoord.wire import json_text
from kubecoord.wire.crd import GROUP, VERSION

__all__ = ["ApiException", "RequestFailed", "acall", "apply", "call", "delete", "list_objects", "patch_status",
           "timeout_for"]

REQUEST_TIMEOUT = fencing.REQUEST_TIMEOUT
MERGE_PATCH = "application/merge-patch+json"

_lock = threading.Lock()
_client: Transport | None = None
USER_AGENT = "kubecoord-operator"
"""What the operator's requests say they are; ``kubecoord operator`` appends its identity
(``kubecoord-operator/POD``), so the API server's audit log tells the replicas apart."""


class RequestFailed(ApiException):
    """The API answered ``method path`` outside 2xx: ``status``, ``reason`` and the
    Status message (for a 403, who may not do what: verb, resource, namespace)."""

    def __init__(self, method: str, path: str, response: Any) -> None:
        super().__init__(http_resp=response)
        self.method, self.path = method, path

    def __str__(self) -> str:
        body = self.body or b""
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
        try:
            message = str(json_text.loads_object(text).get("message") or "")
        except ValueError:  # not a Status: an error page from a proxy, say
            message = text[:300]
        return f"{self.method} {self.path}: HTTP {self.status} {self.reason}" + (f": {message}" if message else "")


def kubeconfig() -> str | None:
    """The operator's kubeconfig: ``kubecoord operator --kubeconfig`` (which sets $KUBECONFIG),
    else $KUBECONFIG; None when it has none (then the pod's service account, else
    ~/.kube/config, as load_config resolves them)."""
    return os.environ.get("KUBECONFIG") or None


def client() -> Transport:
    """The process's one client, built once from load_config's result."""
    global _client
    with _lock:
        if _client is None:
            _client = Transport(load_config(kubeconfig=kubeconfig()).configuration)
        return _client


def reset() -> None:
    """Forget the shared client (tests that switch clusters)."""
    global _client
    with _lock:
        if _client is not None:
            _client.close()
        _client = None


@dataclass(frozen=True, slots=True)
class ObjectPath:
    collection: str
    name: str

    @property
    def item(self) -> str:
        return f"{self.collection}/{self.name}"


_PLURALS = {"Lease": "leases", "ConfigMap": "configmaps", "Role": "roles", "RoleBinding": "rolebindings"}


def collection_path(api_version: str, plural: str, namespace: str) -> str:
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{prefix}/namespaces/{namespace}/{plural}"


def object_path(obj: dict[str, Any]) -> ObjectPath:
    metadata = obj["metadata"]
    plural = _PLURALS[obj["kind"]]
    return ObjectPath(collection_path(obj["apiVersion"], plural, metadata["namespace"]), metadata["name"])


def call(method: str, path: str, body: Any = None, *, content_type: str = "application/json",
         headers: dict[str, str] | None = None) -> Any:
    """One blocking request through the client's auth and TLS settings; the decoded JSON.
    ``headers`` replace the fencing's for this write (kubecoord.operator.term's probes)."""
    return _decoded(method, path, client().request(method, path, **_request(method, path, body, content_type, headers)))


async def acall(method: str, path: str, body: Any = None, *, content_type: str = "application/json") -> Any:
    """``call`` on the event loop (the transport's asynchronous face)."""
    response = await client().arequest(method, path, **_request(method, path, body, content_type, None))
    return _decoded(method, path, response)


def _request(method: str, path: str, body: Any, content_type: str, headers: dict[str, str] | None) -> dict[str, Any]:
    """What both faces send: the body, the headers (the fencing's unless ``headers``: a write
    is refused here all the same when this replica may not write), the request's timeout, and
    whether a read may go again on a connection closed unanswered."""
    extra = _admitted(method, path)
    if headers is not None:
        extra = headers
    return {
        "body": None if body is None else json.dumps(body).encode(),
        "headers": {"Content-Type": content_type, "User-Agent": USER_AGENT, **extra},
        "timeout": timeout_for(method, path),
        "resend_if_closed": _is_read(method, path),
    }


def _decoded(method: str, path: str, response: Any) -> Any:
    """The answer's JSON; RequestFailed outside 2xx, ApiException for a 2xx that is not JSON."""
    if not 200 <= response.status < 300:
        raise RequestFailed(method, path.partition("?")[0], response)
    try:
        return json_text.loads(response.data) if response.data else None
    except ValueError:
        raise ApiException(status=response.status, reason=f"{method} {path.partition('?')[0]}: the answer "
                           "is not JSON") from None


async def aclose() -> None:
    """Close the client's session on the running loop (the operator's cleanup, before its
    loop ends)."""
    with _lock:
        current = _client
    if current is not None:
        await current.aclose()


QUESTIONS = "/apis/authorization.k8s.io/"
"""Access reviews: POSTs that store nothing (kubecoord.operator.access asks them on every
replica), sent as reads are."""


def _is_read(method: str, path: str) -> bool:
    return method == "GET" or (method == "POST" and path.startswith(QUESTIONS))


def _admitted(method: str, path: str) -> dict[str, str]:
    """What a request is sent with beyond the usual: nothing for a read (an access review
    too); for a write, the fencing's headers (its term), or NotLeading when this replica may
    not write."""
    if _is_read(method, path):
        return {}
    headers = fencing.admit(method, path)
    if headers is None:
        raise ApiException(status=0, reason="NotLeading: this replica does not hold the operator Lease")
    return headers


def timeout_for(method: str, path: str = "") -> float:
    """A request's timeout: a write's ends within the operator Lease's term (fencing)."""
    return REQUEST_TIMEOUT if _is_read(method, path) else fencing.write_timeout()


async def patch_status(plural: str, namespace: str, name: str, status: dict[str, Any]) -> bool:
    """Merge-patch the status subresource (None removes a field); False if the object is gone."""
    path = f"{collection_path(f'{GROUP}/{VERSION}', plural, namespace)}/{name}/status"
    try:
        await acall("PATCH", path, {"status": status}, content_type=MERGE_PATCH)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


async def apply(obj: dict[str, Any]) -> None:
    """Create ``obj``, or merge-patch an existing one to carry its metadata, rules, subjects and data."""
    path = object_path(obj)
    try:
        await acall("POST", path.collection, obj)
    except ApiException as error:
        if error.status != 409:
            raise
        patch = {key: value for key, value in obj.items() if key not in ("apiVersion", "kind", "spec")}
        await acall("PATCH", path.item, patch, content_type=MERGE_PATCH)


async def delete(obj: dict[str, Any]) -> bool:
    """Delete ``obj``; False if it was already gone."""
    try:
        await acall("DELETE", object_path(obj).item)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


async def list_objects(api_version: str, plural: str, namespace: str, label_selector: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"labelSelector": label_selector})
    result = await acall("GET", f"{collection_path(api_version, plural, namespace)}?{query}")
    return list((result or {}).get("items") or [])
