"""Fencing at the API server: every write of the active replica names its term, and the
chart's admission policy refuses a term that is not the operator Lease's current one.

A check in the process (kubecoord.operator.fencing) cannot stop a request that is
already on the wire, or frozen with its process between the check and the send: on
SIGCONT it goes out, after a standby took over. So with ``kubecoord operator
--fence-writes`` the term travels with the request and the API server judges it:

- The term is the operator Lease as this replica acquired it: ``HOLDER/TRANSITIONS``
  (``spec.holderIdentity`` and ``spec.leaseTransitions``, which goes up by one on every
  change of holder and never back: kubecoord's epoch). Renewals do not change it.
- Each write is sent as the replica's own ServiceAccount impersonating itself with one
  extra — ``Impersonate-User: system:serviceaccount:NS:SA`` and
  ``Impersonate-Extra-kubecoord.dev%2Fterm: HOLDER/TRANSITIONS`` — because a request's
  user info is what an admission policy sees of every request alike: a status
  subresource write (whose metadata the server resets before admission), a DELETE (no
  object), a create. Same identity, same rights; RBAC must allow the impersonation
  (the chart's Role: ``impersonate`` on its own ServiceAccount and on
  ``userextras/kubecoord.dev/term``).
- The chart's ValidatingAdmissionPolicy (paramKind Lease; its parameter is the operator
  Lease itself) refuses a request by that ServiceAccount that names a term other than
  ``params.spec.holderIdentity + '/' + params.spec.leaseTransitions`` (403).

Before it writes anything, a replica that has just acquired the Lease makes ``confirm``'s
two dry-run creates: one naming its term, repeated until admitted — the API server's copy
of the Lease (an informer, not a quorum read) has caught up with the acquisition — and one
naming another term, which must be refused — the policy is in force. From then on any
request of an earlier term that reaches that API server is refused, so no write of a
deposed replica is applied after its successor's first write.

Not guaranteed: a request of the old term admitted before the confirmation (it is
applied before the successor's first write, then repaired by it); with several API
servers, one whose copy of the Lease lags the one that confirmed; requests without a
term — the operator Lease's own election, and writes through kubecoord backend handles
(the operator-led group coordinator's election and record, expired members' reaping),
which rely on their compare-and-set; identities other than a ServiceAccount (a user's
groups do not follow an impersonated name) — ``FencingUnavailable``.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

from kubecoord.operator import kubeapi
from kubecoord.wire import object_names

EXTRA = "kubecoord.dev/term"
"""The user-info extra that carries the term (what the admission policy reads)."""
PROBE = "kubecoord-operator-term-probe"
"""The ConfigMap ``confirm`` dry-run creates in the operator Lease's namespace (never stored)."""
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


class FencingUnavailable(RuntimeError):
    """The API server cannot fence this replica's writes: why, and what to install."""


@dataclass(frozen=True, slots=True)
class Term:
    holder: str
    transitions: int

    def __str__(self) -> str:
        return f"{self.holder}/{self.transitions}"


def whoami() -> str:
    """This process's username as the API server authenticates it (a SelfSubjectReview)."""
    review = kubeapi.call("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                          {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    return str(((review or {}).get("status") or {}).get("userInfo", {}).get("username") or "")


def headers(username: str, term: Term) -> dict[str, str]:
    """What every write of ``term`` is sent with: the ServiceAccount impersonating itself,
    with the term as its one extra."""
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        raise FencingUnavailable(
            f"--fence-writes needs the operator to run as a ServiceAccount, not {username!r} "
            "(a user's groups do not follow an impersonated name)")
    return {"Impersonate-User": username, f"Impersonate-Extra-{urllib.parse.quote(EXTRA, safe='')}": str(term)}


def confirm(username: str, term: Term, namespace: str, *, timeout: float,
            leading: Callable[[], bool], interval: float = 0.05) -> None:
    """Return once the API server admits writes of ``term`` and refuses another term (its
    copy of the Lease, and of the policy, caught up); FencingUnavailable if it does not
    within ``timeout`` (the policy is not in force) or RBAC refuses the impersonation;
    return early, unconfirmed, if ``leading()`` turns False (the caller stops anyway)."""
    deadline = time.monotonic() + timeout
    stale = Term(term.holder, term.transitions - 1)
    while True:
        refusal = _probe(username, term, namespace)
        if refusal is None:
            if _probe(username, stale, namespace) is not None:
                return
            problem = (f"the API server admitted a write of the stale term {stale}: the operator's term policy "
                       "(the chart's rbac.fenceOperatorWrites) is not installed or not enforced")
        else:
            problem = f"the API server did not admit this replica's term {term}: {refusal}"
        if not leading():
            return
        if time.monotonic() >= deadline:
            raise FencingUnavailable(f"{problem} (within {timeout:g} s)")
        time.sleep(interval)


def _probe(username: str, term: Term, namespace: str) -> str | None:
    """A dry-run create naming ``term``: None when admitted, else the policy's refusal.
    Any other refusal (RBAC, a missing namespace) raises FencingUnavailable."""
    # Labelled as kubecoord's, as everything the operator writes: the chart's policy on the
    # operator's writes (templates/operatorpolicy.yaml) refuses an unlabelled create.
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": PROBE, "namespace": namespace,
                         "labels": {object_names.MANAGED_BY_LABEL: object_names.MANAGED_BY}}}
    path = f"{kubeapi.collection_path('v1', 'configmaps', namespace)}?dryRun=All"
    try:
        kubeapi.call("POST", path, body, headers=headers(username, term))
    except kubeapi.ApiException as error:
        message = _message(error)
        if error.status == 403 and "ValidatingAdmissionPolicy" in message:
            return message
        if error.status == 409:  # someone stored an object of that name: admission passed
            return None
        raise FencingUnavailable(f"the term probe {PROBE} in {namespace} was refused: {error}") from None
    return None


def _message(error: kubeapi.ApiException) -> str:
    body = error.body or b""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    try:
        return str(json.loads(text).get("message") or "")
    except (ValueError, AttributeError):
        return text[:300]
