"""Pure converters between a coordination.k8s.io/v1 Lease (as JSON) and an election record
(kubecoord.wire.leader_record.LeaderRecord).

Field-compatible with client-go's LeaseLock (resourcelock/leaselock.go), so that Go
controllers and kubecoord clients can run for the same Lease:

==========================  ================================================================
Lease field                 election record
==========================  ================================================================
spec.holderIdentity         holder ("" or absent: nobody holds it, e.g. after a release)
spec.leaseDurationSeconds   lease_duration_seconds (whole seconds)
spec.acquireTime            acquire_time (MicroTime: RFC 3339 UTC with microseconds)
spec.renewTime              renew_time (MicroTime)
spec.leaseTransitions       transitions: +1 on every change of holder; kubecoord's epoch
==========================  ================================================================

The holder's data lives in the annotation object_names.HOLDER_DATA_ANNOTATION as JSON with the
holder's id, because client-go rewrites only the spec: data written by another holder
reads as "". Converting never touches other metadata (labels, other annotations,
resourceVersion), so an update keeps what others put there.

kubecoord creates a Lease with leaseTransitions 1 (the first acquisition is a change of
holder), so epochs it hands out start at 1; a Lease created by client-go starts at 0.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import math
from typing import Any

from kubecoord.wire import json_text, object_names
from kubecoord.wire.leader_record import LeaderRecord, from_unix, released

__all__ = [
    "LeaderRecord",
    "format_micro_time",
    "from_unix",
    "lease_with_record",
    "member_of_lease",
    "parse_micro_time",
    "record_from_lease",
    "released",
    "spec_from_record",
]

MICRO_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def format_micro_time(moment: dt.datetime) -> str:
    """A datetime -> MicroTime as the API server serializes it: 2026-11-22T21:47:03.123456Z."""
    if moment.tzinfo is None:
        raise ValueError("MicroTime needs an aware datetime")
    return moment.astimezone(dt.UTC).strftime(MICRO_TIME_FORMAT)


def parse_micro_time(text: str | None) -> dt.datetime | None:
    """MicroTime or Time (RFC 3339, with or without fraction, Z or an offset) -> aware datetime."""
    if not text:
        return None
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC)


def record_from_lease(lease: dict[str, Any]) -> LeaderRecord:
    """Read the election record of a Lease (one written by client-go included)."""
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    return LeaderRecord(
        holder=holder,
        lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
        acquire_time=parse_micro_time(spec.get("acquireTime")),
        renew_time=parse_micro_time(spec.get("renewTime")),
        transitions=int(spec.get("leaseTransitions") or 0),
        data=_holder_data(lease, holder),
    )


def member_of_lease(lease: dict[str, Any], group: str) -> tuple[str, str] | None:
    """(member id, data) of ``group``'s member Lease that holds itself, else None: named after
    its group and id (object_names.member_id_of: the name is the proof) and held by that
    id. Whether it is alive is the expiry rule's business (leader_record.expires_at)."""
    member_id = object_names.member_id_of(lease, group)
    if member_id is None or (lease.get("spec") or {}).get("holderIdentity") != member_id:
        return None
    annotations = (lease.get("metadata") or {}).get("annotations") or {}
    return member_id, str(annotations.get(object_names.MEMBER_DATA_ANNOTATION, ""))


def _holder_data(lease: dict[str, Any], holder: str) -> str:
    raw = ((lease.get("metadata") or {}).get("annotations") or {}).get(object_names.HOLDER_DATA_ANNOTATION)
    if not raw or not holder:
        return ""
    try:
        parsed = json_text.loads(raw)
    except ValueError:
        return ""
    if not isinstance(parsed, dict) or parsed.get("holder") != holder:
        return ""  # written by an earlier holder; a client-go holder kept it untouched
    data = parsed.get("data", "")
    return data if isinstance(data, str) else ""


def spec_from_record(record: LeaderRecord) -> dict[str, Any]:
    """client-go's LeaderElectionRecordToLeaseSpec."""
    spec: dict[str, Any] = {
        "holderIdentity": record.holder,
        # Whole seconds, rounded up so that followers never wait less than configured.
        "leaseDurationSeconds": max(1, math.ceil(record.lease_duration_seconds)),
        "leaseTransitions": record.transitions,
    }
    if record.acquire_time is not None:
        spec["acquireTime"] = format_micro_time(record.acquire_time)
    if record.renew_time is not None:
        spec["renewTime"] = format_micro_time(record.renew_time)
    return spec


def lease_with_record(
    lease: dict[str, Any] | None,
    record: LeaderRecord,
    *,
    name: str,
    namespace: str,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    holder_data: bool = True,
) -> dict[str, Any]:
    """A Lease body carrying ``record``: ``lease`` (kept metadata, resourceVersion included)
    with spec and holder annotation replaced, or a new Lease when ``lease`` is None.

    ``labels`` and ``annotations`` are added; ``holder_data=False`` leaves the holder-data
    annotation alone (group members keep their data in annotations of their own)."""
    body: dict[str, Any] = copy.deepcopy(lease) if lease is not None else {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
    }
    body.setdefault("apiVersion", "coordination.k8s.io/v1")
    body.setdefault("kind", "Lease")
    metadata = body.setdefault("metadata", {})
    if labels:
        metadata.setdefault("labels", {}).update(labels)
    kept = metadata.setdefault("annotations", {})
    if annotations:
        kept.update(annotations)
    if not holder_data:
        pass
    elif record.holder:
        kept[object_names.HOLDER_DATA_ANNOTATION] = json.dumps(
            {"holder": record.holder, "data": record.data}, ensure_ascii=False, separators=(",", ":")
        )
    else:
        kept.pop(object_names.HOLDER_DATA_ANNOTATION, None)
    if not kept:
        metadata.pop("annotations")
    body["spec"] = spec_from_record(record)
    return body
