"""Clients bind by name: a handle reads the kubecoord.dev resource of the same name.

``coord.leader_election("billing")`` on ``kubernetes://NS`` reads the LeaderElection
``billing`` in NS; ``group_membership("workers")`` the Group ``workers``;
``storage("topics")`` the KVStore ``topics``. When the resource exists its spec decides:

- ``backend: zookeeper``, ``cassandra`` or ``etcd``: the handle comes from a coordinator
  of that backend for the resource's connection settings (``spec.zookeeper``,
  ``spec.cassandra``, ``spec.etcd``; the credentials of the Secret ``spec.etcd.secretName``
  names, read with this client's identity), opened through kubecoord.connect() on first
  use and closed with this coordinator;
- timings: LeaderElection leaseDurationSeconds / renewDeadlineSeconds /
  retryPeriodSeconds; Group leaseDurationSeconds / renewIntervalSeconds (a member's
  time to live and heartbeat);
- KVStore sizeLimit: writes that would make the store's ConfigMap data larger raise
  StoreFullError.

So application code carries no timing constants. Precedence: per-handle keyword
arguments, then the resource's spec, then the connect() options. Only a 404 means "no
resource": API discovery says kubecoord.dev/v1alpha1 is not served (no CRDs, no operator;
discovery is readable by every authenticated user, so no extra right is needed), or the
object does not exist. Then the connect() options apply (client-go's defaults: 15 s,
10 s, 2 s). Discovery comes first because RBAC answers 403, not 404, to a user without
rights asking for a resource type the server does not have.

Binding is not a fallback: a 403 (the ServiceAccount is not in ``spec.clients``), a
timeout or a 5xx while reading the resource raises PermissionDeniedError or
BackendUnavailableError from the call that makes the handle. Silently using another
backend or default timings would let two clients of one resource disagree on its
timings, or on where its data lives. Not guaranteed: that a handle follows later changes
of the spec (it reads the resource once, when created).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kubecoord.backends.kubernetes.client import KubeClient, Resource
from kubecoord.errors import PermissionDeniedError
from kubecoord.resources import BackendSpec, election_timing_overrides, member_timings, parse_quantity
from kubecoord.resources.credentials import connection_options
from kubecoord.timings import Timings
from kubecoord.wire.crd import GROUP, KINDS, VERSION

log = logging.getLogger("kubecoord.kubernetes.binding")



_CUSTOM_PATH = f"/apis/{GROUP}/{VERSION}"
LEADER_ELECTIONS = Resource("leaderelections", _CUSTOM_PATH)
GROUPS = Resource("groups", _CUSTOM_PATH)
KV_STORES = Resource("kvstores", _CUSTOM_PATH)
SECRETS = Resource("secrets", "/api/v1")


@dataclass(frozen=True, slots=True)
class Binding:
    """The spec of the resource a handle is named after."""

    spec: dict[str, Any]

    @property
    def backend(self) -> str:
        return str(self.spec.get("backend", "kubernetes"))

    def connection(self, client: KubeClient) -> tuple[str, dict[str, Any]]:
        """connect() URL and options of the backend the resource lives in (the resource
        model's), with the credentials of the Secret it names, read with this client's
        identity (the operator grants its spec.clients ``get`` on it)."""
        backend = BackendSpec.from_spec(self.spec, namespace=client.namespace)
        options = dict(backend.options)
        if backend.credentials is not None:
            data = None
            if backend.credentials.secret is not None:
                secret = client.get(SECRETS, backend.credentials.secret)
                data = None if secret is None else dict(secret.get("data") or {})
            options.update(connection_options(backend.credentials, data))
        return backend.url, options

    def election_timings(self, base: Timings) -> Timings:
        return base.with_overrides(**election_timing_overrides(self.spec))

    def group_timings(self, base: Timings) -> Timings:
        lease, retry = member_timings(self.spec)
        # A member has no renew deadline of its own; keep the invariant the Timings check
        # (lease > deadline > 1.2 x retry) with a deadline between the two.
        deadline = base.renew_deadline if lease > base.renew_deadline > 1.2 * retry else (lease + 1.2 * retry) / 2
        return Timings(lease_duration=lease, renew_deadline=deadline, retry_period=retry)

    def size_limit(self) -> int | None:
        """spec.sizeLimit in bytes; None without one (or an unreadable one: the shards' room applies)."""
        return parse_quantity(self.spec["sizeLimit"]) if "sizeLimit" in self.spec else None


def lookup(client: KubeClient, resource: Resource, name: str) -> Binding | None:
    """The Binding of the resource ``name``; None only when the API answers 404.

    Raises PermissionDeniedError (403) or BackendUnavailableError (timeout, 5xx): the
    caller sees them, nothing falls back to defaults.
    """
    if not client.served(GROUP, VERSION):
        log.debug("no binding: kubecoord.dev not served", extra={"resource": resource.plural, "object": name})
        return None
    try:
        obj = client.get(resource, name)
    except PermissionDeniedError as error:
        # RBAC answers 403 both for a resource that exists without this identity in its
        # spec.clients and for one that does not exist at all (no Role is made for it): say both.
        kind = KINDS.get(resource.plural, resource.plural)
        raise PermissionDeniedError(
            f"{error}. Either {kind} {name!r} does not exist in namespace {client.namespace!r} (kubectl get "
            f"{resource.plural} {name} -n {client.namespace}), or this identity is not in its spec.clients "
            "(the operator grants access to the ServiceAccounts listed there)"
        ) from None
    if obj is None:
        log.debug("no binding", extra={"resource": resource.plural, "object": name})
        return None
    return Binding(spec=dict(obj.get("spec") or {}))
