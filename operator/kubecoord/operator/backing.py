"""The Kubernetes objects behind a resource on the kubernetes backend, named exactly as
the backend names them (kubecoord.wire.object_names).

- LeaderElection NAME: the Lease NAME and the Lease NAME.epoch (the high-water mark of
  the epochs issued on it: kubecoord._core.lease.elector), created up front with an
  ownerReference to the resource, so Kubernetes' garbage collector deletes them with the
  resource; a deleted one is re-created by the drift repair.
- Group NAME: one Lease per member, created by the members themselves; the operator
  adopts each (adds the ownerReference). The group coordinator's election Lease NAME-gc
  and its mark NAME-gc.epoch, created up front. Expired members' Leases are reaped by the
  backend's observers, the operator among them (kubecoord.operator.kinds). Also the
  ConfigMap kubecoord-kv.NAME-gc (one shard) that holds the group coordinator's
  generation record, created up front so that clients granted it by name never need
  ``create``; one that members made before the Group existed is used as it is.
- KVStore NAME: its ConfigMaps (shards) kubecoord-kv.NAME, kubecoord-kv.NAME.1, ..., all
  created up front with an ownerReference, so that clients granted them by name never need
  ``create``. The shard count comes from spec.sizeLimit when shard 0 is first created and is
  recorded on it (kubecoord.wire.kv_shards); later sizeLimit changes never change it.

Ownership: the operator creates these objects and changes or deletes only objects that
carry an ownerReference to the resource (its uid). A create that meets an existing object
(409) reads whose it is: ours (its ownerReference has this uid) is kept; one owned only by
an earlier resource of the same kind and name (deleted — a name holds one resource at a
time — its garbage not yet collected) is replaced: the operator deletes it, with its uid
as precondition, and creates its own, never adopting the old resource's data; if that
fails it is *pending* — the resource reports BackingObjects=False, reason Replacing, and
drift repair tries again until the object is gone (the garbage collector's or ours); one owned by anything
else, or with no owner, is foreign (below), except a Group coordinator's objects made by
its members before the Group existed (no owner, the kubecoord label), which are used as
they are. A same-named object without one — a
client-go application's own Lease, a ConfigMap somebody made — is never adopted,
relabelled or deleted: ``ensure_owned`` reports it as foreign, and the resource shows the
condition BackingObjects=False (NotOwned). Member Leases are the exception the design
asks for: kubecoord clients create them with the group's label and member annotation,
and the operator adopts exactly those.

Epochs never go backwards: the epoch is the Lease's leaseTransitions and every
acquisition adds 1 to what it finds. A Lease someone deleted is re-created as the
operator's watch last saw it — the DELETED event carries the object's final state: its
holder, times and leaseTransitions — so the holder (if alive) renews it at the same
epoch, the other candidates wait a whole lease from seeing it back, and the next leader's
epoch is above every earlier one. A deletion the watch missed (noticed by a re-list after
a broken watch) leaves only the cached version, which may be an acquisition behind: that
one is re-created one epoch above, as from the status below. Candidates bound to the resource never create the Lease
themselves (kubecoord._core.lease.elector). Without that final state (the operator
restarted meanwhile) it is re-created from the resource's status — last known leader and
times — at status.epoch + 1: the status may lag the Lease by one acquisition (the status
write behind the Lease change, or a term begun while the operator was down), and a Lease
re-created at status.epoch would hand that epoch to the next leader a second time
(the soak's epoch_not_increasing). One above is ZooKeeper's epoch bump: the holder, if
alive, renews at the bumped epoch (its fencing token only goes up) and every later
acquisition goes above every epoch issued. Not covered: two or more acquisitions the
operator never saw (all while it was down) before the Lease was deleted — nothing left
remembers them, except candidates that saw them (they acquire above their own highest).

The high-water mark makes all of this a second line: candidates write every new epoch
one above the Lease NAME.epoch and raise it before they lead, so an epoch is never issued
twice even when the Lease is edited down, or deleted and re-created by someone else
(a foreign Lease: NotOwned, and still no epoch below the mark). A deleted mark is
re-created at the epoch the Lease would be re-created at, or its own final state if
higher. Deleting the resource deletes both: a LeaderElection created again under the
same name starts its epochs again.

Guarantee: after a resource is deleted, its finalizer removes every object of it that
carries no ownerReference yet (a member that joined after the last adoption), so a
deleted resource leaves nothing behind; objects it did not create stay.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubecoord.operator import kubeapi
from kubecoord.operator.model import owner_reference, size_limit_bytes
from kubecoord.timings import DEFAULT_LEASE_DURATION
from kubecoord.wire import object_names
from kubecoord.wire.crd import GROUP
from kubecoord.wire.group_record import derived_name
from kubecoord.wire.kv_shards import recorded_shards, shard_count_for
from kubecoord.wire.lease import LeaderRecord, lease_with_record, parse_micro_time

LEASES = ("coordination.k8s.io/v1", "leases")
CONFIGMAPS = ("v1", "configmaps")


def _metadata(body: dict[str, Any], name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": body["metadata"]["namespace"],
        "labels": {object_names.MANAGED_BY_LABEL: object_names.MANAGED_BY, **labels},
        "ownerReferences": [owner_reference(body)],
    }


def election_lease(body: dict[str, Any], final: dict[str, Any] | None = None) -> dict[str, Any]:
    """The election's Lease to create; ``final``: the deleted Lease as last seen (if ours).

    Without the final state (the operator restarted since), the Lease is re-created from
    the resource's status — its last known leader, leader data and times — never
    holderless: a holderless Lease is free to take, and a follower would take it while the
    real holder is still inside its renew deadline (two leaders). The holder, if alive,
    renews it; if not, the others wait a whole lease from seeing it, as for any holder.
    Its epoch is status.epoch + 1 once the resource has had a status (see the module
    docstring: the status may be one acquisition behind); 0 for a new resource.
    """
    name = object_names.election_lease_name(body["metadata"]["name"])
    status = body.get("status") or {}
    epoch = int(status.get("epoch") or 0)
    spec: dict[str, Any] = {}
    annotations: dict[str, str] = {}
    if final is not None and owned(final, body):
        # The DELETED event's final state: exactly what was issued last; the next
        # acquisition makes it one more. A deletion the watch missed (seen by a re-list):
        # the cached version, which a newer acquisition may have followed — one above.
        spec = {key: value for key, value in dict(final.get("spec") or {}).items() if value is not None}
        annotations = dict((final.get("metadata") or {}).get("annotations") or {})
        if annotations.get(object_names.FINAL_STATE_UNKNOWN_ANNOTATION):
            epoch = max(epoch, int(spec.get("leaseTransitions") or 0)) + 1
    else:
        if status.get("observedGeneration") is not None or status.get("epoch") is not None:
            # Reconciled before, so its Lease existed and may have been acquired once more
            # than the status says: start strictly above what may have been issued.
            epoch += 1
        if status.get("leader"):
            spec, annotations = _restored(body, name, epoch)
    spec["leaseTransitions"] = max(epoch, int(spec.get("leaseTransitions") or 0))
    metadata = _metadata(body, name, {})
    holder_data = annotations.get(object_names.HOLDER_DATA_ANNOTATION)
    if holder_data:
        metadata["annotations"] = {object_names.HOLDER_DATA_ANNOTATION: holder_data}
    return {"apiVersion": LEASES[0], "kind": "Lease", "metadata": metadata, "spec": spec}


def election_mark(
    body: dict[str, Any], lease: dict[str, Any], final: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The high-water mark Lease ``NAME.epoch`` of an election whose Lease is (to be) ``lease``:
    no holder, leaseTransitions at the Lease's or the mark's own final state, whichever is
    higher (a mark is never re-created below what it said)."""
    epoch = int((lease.get("spec") or {}).get("leaseTransitions") or 0)
    if final is not None and owned(final, body):
        epoch = max(epoch, int((final.get("spec") or {}).get("leaseTransitions") or 0))
    name = object_names.epoch_lease_name(lease["metadata"]["name"])
    return {"apiVersion": LEASES[0], "kind": "Lease", "metadata": _metadata(body, name, {}),
            "spec": {"leaseTransitions": epoch}}


def _restored(body: dict[str, Any], name: str, epoch: int) -> tuple[dict[str, Any], dict[str, str]]:
    """The Lease spec and annotations of the status's last known leader, at ``epoch``."""
    status = body.get("status") or {}
    now = dt.datetime.now(tz=dt.UTC)
    # A resource without leaseDurationSeconds restores a Lease with the backend's default.
    duration = float((body.get("spec") or {}).get("leaseDurationSeconds") or DEFAULT_LEASE_DURATION)
    record = LeaderRecord(
        holder=str(status["leader"]), lease_duration_seconds=duration,
        acquire_time=parse_micro_time(status.get("leaderSince")) or now,
        renew_time=parse_micro_time(status.get("renewTime")) or now,
        transitions=epoch, data=str(status.get("leaderData") or ""),
    )
    restored = lease_with_record(None, record, name=name, namespace=body["metadata"]["namespace"])
    return dict(restored["spec"]), dict(restored["metadata"].get("annotations") or {})


def owned(obj: dict[str, Any], body: dict[str, Any]) -> bool:
    """Whether ``obj`` carries an ownerReference to the resource ``body`` (by uid)."""
    uid = body["metadata"].get("uid")
    return any(ref.get("uid") == uid for ref in (obj.get("metadata") or {}).get("ownerReferences") or [])


def cached_and_owned(body: dict[str, Any], observed: Callable[[str, str], dict[str, Any] | None]) -> bool:
    """Whether every backing object of ``body`` is in the operator's watch cache and owned by
    it, so that a drift check needs no request (``observed(plural, name)``: the cache)."""
    kind, name = body["kind"], body["metadata"]["name"]
    if kind == "LeaderElection":
        lease_name = object_names.election_lease_name(name)
        return all((lease := observed("leases", leased)) is not None and owned(lease, body)
                   for leased in (lease_name, object_names.epoch_lease_name(lease_name)))
    if kind == "KVStore":
        zero = observed("configmaps", object_names.store_shard_name(name, 0))
        if zero is None:
            return False
        shards = object_names.store_shard_names(name, recorded_shards(zero))
        return all((cm := observed("configmaps", shard)) is not None and owned(cm, body) for shard in shards)
    if kind == "Group":
        # The coordinator's election Lease and record ConfigMap (members create their own
        # Leases: those are not repaired): ours, or made by members before the Group existed.
        return all((obj := observed(plural, record["metadata"]["name"])) is not None and usable(obj, body)
                   for plural, record in (("leases", coordinator_lease(body)), ("leases", coordinator_mark(body)),
                                          ("configmaps", coordinator_configmap(body))))
    return False


def earlier_incarnation(obj: dict[str, Any], body: dict[str, Any]) -> bool:
    """Whether ``obj`` belongs to an earlier resource of ``body``'s kind and name (another
    uid): deleted, its objects waiting for the garbage collector."""
    if owned(obj, body):
        return False
    uid, kind, name = body["metadata"].get("uid"), body["kind"], body["metadata"]["name"]
    return any(ref.get("kind") == kind and ref.get("name") == name and ref.get("uid") != uid
               and str(ref.get("apiVersion", "")).startswith(f"{GROUP}/")
               for ref in (obj.get("metadata") or {}).get("ownerReferences") or [])


def usable(obj: dict[str, Any], body: dict[str, Any]) -> bool:
    """Whether a Group may use ``obj`` as its coordinator's object: ours, or made by its members
    (no owner at all, kubecoord's label) before the Group existed."""
    metadata = obj.get("metadata") or {}
    made_by_members = not metadata.get("ownerReferences") and \
        (metadata.get("labels") or {}).get(object_names.MANAGED_BY_LABEL) == object_names.MANAGED_BY
    return owned(obj, body) or (body["kind"] == "Group" and made_by_members)


@dataclass
class Ensured:
    objects: list[dict[str, Any]] = field(default_factory=list)
    """The backing objects the resource needs (owned or not)."""
    foreign: list[str] = field(default_factory=list)
    """"Kind name" of same-named objects the operator did not create (left untouched)."""
    created: list[str] = field(default_factory=list)
    """"Kind name" of the objects this call created (drift repair logs them)."""
    pending: list[str] = field(default_factory=list)
    """"Kind name" of an earlier same-named resource's objects, to be replaced once collected."""

    def add(self, obj: dict[str, Any], verdict: str) -> None:
        if verdict != OURS:
            (self.foreign if verdict == FOREIGN else self.pending).append(f"{obj['kind']} {obj['metadata']['name']}")


OURS, FOREIGN, PENDING = "ours", "foreign", "pending"
"""What a create found: created or ours (or usable), somebody else's, an earlier incarnation's."""


async def _create_or_check(
    obj: dict[str, Any], body: dict[str, Any], created: list[str] | None = None, alive: Alive | None = None
) -> str:
    """Create ``obj`` if absent (its name added to ``created``); whose the object of that name
    is (OURS, FOREIGN, PENDING). POST first (one request when it is new), GET on 409."""
    path = kubeapi.object_path(obj)
    if alive is not None and not alive():
        return OURS  # the resource is gone: never re-create anything for its uid
    made, existing = await _post_else_read(obj)
    if made:
        if created is not None:
            created.append(f"{obj['kind']} {obj['metadata']['name']}")
        return OURS
    if existing is None:
        return PENDING  # collected between the POST and the GET: create it on the next try
    if earlier_incarnation(existing, body):
        return await _replace(obj, existing, body, created)
    if not owned(existing, body):
        return OURS if usable(existing, body) else FOREIGN
    labels = (existing.get("metadata") or {}).get("labels") or {}
    if any(labels.get(key) != value for key, value in obj["metadata"]["labels"].items()):
        patch = {"metadata": {"labels": obj["metadata"]["labels"]}}
        await kubeapi.acall("PATCH", path.item, patch, content_type=kubeapi.MERGE_PATCH)
    return OURS


async def _post_else_read(obj: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
    """POST ``obj``: (True, None) when that created it, else (False, the object of its name),
    read on 409 — (False, None) when that one was collected between the POST and the GET.
    One request when the object is new."""
    path = kubeapi.object_path(obj)
    try:
        await kubeapi.acall("POST", path.collection, obj)
        return True, None
    except kubeapi.ApiException as conflict:
        if conflict.status != 409:
            raise
    return False, await _read(obj)


async def _read(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The object of ``obj``'s name as the API has it, None if there is none."""
    try:
        return await kubeapi.acall("GET", kubeapi.object_path(obj).item) or {}
    except kubeapi.ApiException as error:
        if error.status != 404:
            raise
        return None


async def _delete_if_owned(obj: dict[str, Any], body: dict[str, Any]) -> bool:
    """Delete the object of ``obj``'s name if ``body`` owns it; whether it was deleted."""
    existing = await _read(obj)
    return existing is not None and owned(existing, body) and await kubeapi.delete(obj)


async def _replace(obj: dict[str, Any], existing: dict[str, Any], body: dict[str, Any],
                   created: list[str] | None) -> str:
    """Delete an earlier incarnation's object (only if nothing else owns it; its uid as
    precondition, so a newer object of that name is never deleted), then create ours."""
    refs = (existing.get("metadata") or {}).get("ownerReferences") or []
    if not all(ref.get("kind") == body["kind"] and ref.get("name") == body["metadata"]["name"] for ref in refs):
        return PENDING  # another owner too: the garbage collector only drops the old reference
    path = kubeapi.object_path(obj)
    options = {"kind": "DeleteOptions", "apiVersion": "v1",
               "preconditions": {"uid": existing["metadata"]["uid"]}, "propagationPolicy": "Background"}
    try:
        await kubeapi.acall("DELETE", path.item, options)
    except kubeapi.ApiException as error:
        if error.status not in (404, 409):  # gone already, or another object of that name now
            raise
    try:
        await kubeapi.acall("POST", path.collection, obj)
    except kubeapi.ApiException as error:
        if error.status != 409:
            raise
        return PENDING  # made again meanwhile (a member, a finalizer): the next repair reads it
    if created is not None:
        created.append(f"{obj['kind']} {obj['metadata']['name']}")
    return OURS


def store_configmap(body: dict[str, Any], index: int = 0) -> dict[str, Any]:
    store = body["metadata"]["name"]
    name = object_names.store_shard_name(store, index)
    labels = {object_names.STORE_LABEL: store}
    return {"apiVersion": CONFIGMAPS[0], "kind": "ConfigMap", "metadata": _metadata(body, name, labels)}


def coordinator_lease(body: dict[str, Any]) -> dict[str, Any]:
    """The election Lease of a Group's coordinator (``GROUP-gc``), made up front and owned by
    the Group so that it goes with it (a member would otherwise create it unowned)."""
    name = object_names.election_lease_name(derived_name(body["metadata"]["name"]))
    return {"apiVersion": LEASES[0], "kind": "Lease", "metadata": _metadata(body, name, {}), "spec": {}}


def coordinator_mark(body: dict[str, Any]) -> dict[str, Any]:
    """The high-water mark Lease of the group coordinator's election (``GROUP-gc.epoch``)."""
    name = object_names.epoch_lease_name(object_names.election_lease_name(derived_name(body["metadata"]["name"])))
    return {"apiVersion": LEASES[0], "kind": "Lease", "metadata": _metadata(body, name, {}),
            "spec": {"leaseTransitions": 0}}


def coordinator_configmap(body: dict[str, Any]) -> dict[str, Any]:
    """The one-shard store of a Group's generation record (kubecoord.group_coordinator)."""
    store = derived_name(body["metadata"]["name"])
    metadata = _metadata(body, object_names.store_shard_name(store, 0), {object_names.STORE_LABEL: store})
    metadata["annotations"] = {object_names.KV_SHARDS_ANNOTATION: "1"}
    return {"apiVersion": CONFIGMAPS[0], "kind": "ConfigMap", "metadata": metadata}


async def ensure(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Create the objects a resource needs up front (never adopting others'); returns them."""
    return (await ensure_owned(body)).objects


LastState = Callable[[str, str], dict[str, Any] | None]
"""(plural, name) -> the object as the operator's watch last saw it, deleted or not."""


Alive = Callable[[], bool]
"""Whether the resource still exists as far as the operator's watch knows (drift repair
checks it before every create, so nothing is re-created for a deleted resource)."""


async def ensure_owned(body: dict[str, Any], last_state: LastState | None = None, *,
                       alive: Alive | None = None) -> Ensured:
    """Create what is missing (drift repair too); report same-named objects that are not ours."""
    kind = body["kind"]
    if kind == "KVStore":
        return await _ensure_store(body, alive)
    result = Ensured()
    if kind == "Group":
        for obj in (coordinator_configmap(body), coordinator_lease(body), coordinator_mark(body)):
            result.objects.append(obj)
            result.add(obj, await _create_or_check(obj, body, result.created, alive))
    if kind == "LeaderElection":
        name = object_names.election_lease_name(body["metadata"]["name"])
        lease = election_lease(body, last_state("leases", name) if last_state is not None else None)
        mark_name = object_names.epoch_lease_name(name)
        mark = election_mark(body, lease, last_state("leases", mark_name) if last_state is not None else None)
        for obj in (lease, mark):
            result.objects.append(obj)
            result.add(obj, await _create_or_check(obj, body, result.created, alive))
    return result


async def _ensure_store(body: dict[str, Any], alive: Alive | None = None) -> Ensured:
    """Shard 0 first (recording the shard count only if it creates it), then the others."""
    zero = store_configmap(body, 0)
    planned = shard_count_for(size_limit_bytes(dict(body.get("spec") or {})))
    annotations = {object_names.KV_SHARDS_ANNOTATION: str(planned)}
    created = {**zero, "metadata": {**zero["metadata"], "annotations": annotations}}
    made: list[str] = []
    if alive is not None and not alive():
        return Ensured(objects=[zero])
    new, existing = await _post_else_read(created)
    if new:
        shards = planned
        made.append(f"ConfigMap {zero['metadata']['name']}")
    else:
        if existing is not None and earlier_incarnation(existing, body):
            existing = created if await _replace(created, existing, body, made) == OURS else None
        if existing is None:  # collected between the POST and the GET: the rest waits for it too
            return Ensured(objects=[zero], pending=[f"ConfigMap {zero['metadata']['name']}"])
        shards = recorded_shards(existing)  # never changed once recorded (keys would move)
        if not owned(existing, body):  # somebody else's ConfigMap: leave it, and the rest
            return Ensured(objects=[zero], foreign=[f"ConfigMap {zero['metadata']['name']}"])
    result = Ensured(objects=[zero], created=made)
    for index in range(1, shards):
        shard = store_configmap(body, index)
        result.add(shard, await _create_or_check(shard, body, result.created, alive))
        result.objects.append(shard)
    return result


async def member_leases(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The Group's member Leases: labelled for it *and* named after their member id
    (object_names.member_id_of). A Lease a client of another group labelled for this one is
    not adopted (its owner's deletion would take it along) nor deleted with the Group."""
    group = body["metadata"]["name"]
    leases = await kubeapi.list_objects(*LEASES, body["metadata"]["namespace"], object_names.group_selector(group))
    return [lease for lease in leases if object_names.member_id_of(lease, group) is not None]


async def adopt_members(body: dict[str, Any], leases: list[dict[str, Any]]) -> None:
    """Give member Leases an ownerReference to their Group (Kubernetes' GC then owns them)."""
    uid = body["metadata"]["uid"]
    for lease in leases:
        owners = lease["metadata"].get("ownerReferences") or []
        if any(owner.get("uid") == uid for owner in owners):
            continue
        patch = {"metadata": {"ownerReferences": [*owners, owner_reference(body)]}}
        path = kubeapi.object_path({"apiVersion": LEASES[0], "kind": "Lease", "metadata": lease["metadata"]})
        try:
            await kubeapi.acall("PATCH", path.item, patch, content_type=kubeapi.MERGE_PATCH)
        except kubeapi.ApiException as error:
            if error.status != 404:  # the member left meanwhile
                raise


async def delete_all(body: dict[str, Any]) -> int:
    """Delete every backing object of a resource (finalizer); returns how many were deleted."""
    deleted = 0
    kind, name = body["kind"], body["metadata"]["name"]
    if kind == "LeaderElection":
        lease = election_lease(body)
        for obj in (lease, election_mark(body, lease)):
            deleted += await _delete_if_owned(obj, body)
    elif kind == "Group":
        for record in (coordinator_configmap(body), coordinator_lease(body), coordinator_mark(body)):
            deleted += await _delete_if_owned(record, body)
        for lease in await member_leases(body):
            obj = {
                "apiVersion": LEASES[0],
                "kind": "Lease",
                "metadata": {"name": lease["metadata"]["name"], **_ns(body)},
            }
            deleted += await kubeapi.delete(obj)
    elif kind == "KVStore":
        selector = object_names.store_selector(name)
        for configmap in await kubeapi.list_objects(*CONFIGMAPS, body["metadata"]["namespace"], selector):
            if not owned(configmap, body):
                continue
            obj = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": configmap["metadata"]["name"], **_ns(body)},
            }
            deleted += await kubeapi.delete(obj)
    return deleted


def _ns(body: dict[str, Any]) -> dict[str, str]:
    return {"namespace": body["metadata"]["namespace"]}
