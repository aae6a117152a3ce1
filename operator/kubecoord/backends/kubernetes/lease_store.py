"""The lease core's RecordStore over one coordination.k8s.io/v1 Lease: the shared informer
supplies observations (a watch by name), writes go to the API with the observed
resourceVersion as the compare-and-set, 409 and 404 become RecordConflict.

The high-water mark of the epochs issued on Lease NAME is the Lease ``NAME.epoch``
(object_names.epoch_lease_name): its spec.leaseTransitions, and nothing else in its spec
(no holder: a client-go tool reading it sees a free Lease). It is read with a GET when a
candidate is about to acquire (not watched: acquisitions are rare) and written by PUT at
the resourceVersion read, keeping its metadata (the operator's ownerReference).
"""

from __future__ import annotations

from typing import Any

from kubecoord._core.lease import LeaderRecord, Observation, RecordConflict
from kubecoord.backends.kubernetes.cache import Observed
from kubecoord.backends.kubernetes.client import LEASES, AlreadyExists, Conflict, NotFound
from kubecoord.backends.kubernetes.context import KubernetesContext
from kubecoord.backends.kubernetes.shared_informer import Informer
from kubecoord.errors import NamespaceNotFoundError, PermissionDeniedError
from kubecoord.wire import object_names
from kubecoord.wire.lease import lease_with_record, record_from_lease


def _owned(obj: dict[str, Any] | None) -> bool:
    return bool(obj and (obj.get("metadata") or {}).get("ownerReferences"))


def observation(observed: Observed) -> Observation:
    return Observation(record_from_lease(observed.obj), observed.version, observed.seen_at)


class LeaseStore:
    """kubecoord._core.lease.RecordStore over one Lease, its informer and the API."""

    def __init__(self, context: KubernetesContext, informer: Informer, name: str) -> None:
        self._context = context
        self._informer = informer
        self._name = name
        self._mark_name = object_names.epoch_lease_name(name)
        self._mark: dict[str, Any] | None = None
        """The mark Lease as last read or written (its metadata is kept on writes)."""
        self.fatal: NamespaceNotFoundError | PermissionDeniedError | None = None
        """Set when a write found no namespace, or was refused (RBAC, or the chart's admission
        policy confining a Group client's Lease writes): nominate() raises it at once instead
        of retrying in the background; the caller decides whether to wait and retry."""

    def observed(self) -> Observation | None:
        current = self._informer.get(self._name)
        return observation(current) if current is not None else None

    def refresh(self, timeout: float) -> Observation | None:
        current = self._informer.refresh(self._name, timeout=timeout)
        return observation(current) if current is not None else None

    def create(self, record: LeaderRecord, timeout: float) -> Observation:
        body = lease_with_record(
            None, record, name=self._name, namespace=self._context.namespace,
            labels={object_names.MANAGED_BY_LABEL: object_names.MANAGED_BY},
        )
        try:
            written = self._context.client.create(LEASES, body, timeout=timeout)
        except AlreadyExists:
            raise RecordConflict(self._name) from None
        except (NamespaceNotFoundError, PermissionDeniedError) as exc:
            self.fatal = exc  # nominate() raises it instead of retrying (leader.py)
            raise
        return self._mine(written)

    def update(self, record: LeaderRecord, version: str, timeout: float) -> Observation:
        current = self._informer.get(self._name)
        if current is None and _owned(self._informer.last_state(self._name)):
            # The watch saw an owned Lease deleted. A PUT creates a missing Lease, whatever
            # its resourceVersion, and would put it back without its ownerReference (the
            # resource turned NotOwned for good): its owner (the operator) re-creates it,
            # from its final state, and the holder renews that. A Lease nobody owns, the
            # holder puts back itself, as client-go's does.
            raise RecordConflict(self._name)
        body = lease_with_record(
            current.obj if current is not None else None, record, name=self._name, namespace=self._context.namespace
        )
        body["metadata"]["resourceVersion"] = version
        try:
            written = self._context.client.replace(LEASES, self._name, body, timeout=timeout)
        except (Conflict, NotFound):
            raise RecordConflict(self._name) from None
        except PermissionDeniedError as exc:
            self.fatal = exc
            raise
        return self._mine(written)

    def read_mark(self, timeout: float) -> tuple[int, str | None]:
        try:
            mark = self._context.client.get(LEASES, self._mark_name, timeout=timeout)
        except PermissionDeniedError as exc:
            self.fatal = exc
            raise
        self._mark = mark
        if mark is None:
            return 0, None
        return int((mark.get("spec") or {}).get("leaseTransitions") or 0), str(mark["metadata"]["resourceVersion"])

    def write_mark(self, epoch: int, version: str | None, timeout: float) -> str | None:
        mark = self._mark
        try:
            if version is None:
                body: dict[str, Any] = {
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self._mark_name, "namespace": self._context.namespace,
                                 "labels": {object_names.MANAGED_BY_LABEL: object_names.MANAGED_BY}},
                    "spec": {"leaseTransitions": epoch},
                }
                written = self._context.client.create(LEASES, body, timeout=timeout)
            else:
                if mark is None or str(mark["metadata"]["resourceVersion"]) != version:
                    raise RecordConflict(self._mark_name)  # not the version we read: read again
                body = {**mark, "spec": {**(mark.get("spec") or {}), "leaseTransitions": epoch}}
                written = self._context.client.replace(LEASES, self._mark_name, body, timeout=timeout)
        except (AlreadyExists, Conflict, NotFound):
            raise RecordConflict(self._mark_name) from None
        except (NamespaceNotFoundError, PermissionDeniedError) as exc:
            self.fatal = exc
            raise
        self._mark = written
        return str(written["metadata"]["resourceVersion"])

    def _mine(self, written: dict[str, Any]) -> Observation:
        observed = self._informer.offer(written)
        version = str(written["metadata"]["resourceVersion"])
        if observed is not None and observed.version == version:
            return observation(observed)
        return Observation(record_from_lease(written), version, self._context.clock.now())
