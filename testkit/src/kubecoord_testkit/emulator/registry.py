"""What each verb does to stored objects: the API server's generic registry.

Create, get, list, update (PUT), patch, delete and deletecollection for any resource
type, with: metadata set by the server (uid, creationTimestamp, generation,
resourceVersion), generateName, optimistic concurrency on metadata.resourceVersion,
the status subresource split, finalizers and deletionTimestamp, delete preconditions and
propagation policies, namespaces that must exist, and CRDs that register their resource
types. Garbage collection of dependents lives in ``collecting``, per-kind additions in
``strategies``, HTTP in ``routing``.

Everything here runs on the server's event-loop thread (one request at a time), so a
read-check-write sequence is atomic without further locking.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from kubecoord_testkit.emulator import patching, policies, status
from kubecoord_testkit.emulator.admitting import admit_custom
from kubecoord_testkit.emulator.resources import BUILTINS, CRD_KEY, NAMESPACE_KEY, ResourceType, from_crd
from kubecoord_testkit.emulator.selectors import FIELDS_BY_RESOURCE, combined
from kubecoord_testkit.emulator.store import Store
from kubecoord_testkit.emulator.strategies import blocking_finalizers, check_crd, now, prepare_create, spec_changed
from kubecoord_testkit.emulator.validating import validate

JSON = dict[str, Any]
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# Server-owned metadata that a client's update cannot change.
_IMMUTABLE_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")


@dataclass(frozen=True)
class ListOptions:
    label_selector: str | None = None
    field_selector: str | None = None
    limit: int = 0
    continue_token: str | None = None
    resource_version: str | None = None
    resource_version_match: str | None = None


class Registry:
    def __init__(self, store: Store, *, on_change: Callable[[], None] = lambda: None) -> None:
        self.store = store
        self._on_change = on_change  # schedules a garbage-collection pass
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._rebuild_types()
        for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create(self.resolve("", "v1", "namespaces"), None, {"metadata": {"name": name}})

    # -- resource types --------------------------------------------------------------

    def _rebuild_types(self) -> None:
        types = {(t.group, t.version, t.plural): t for t in BUILTINS}
        for crd in self.store.select(CRD_KEY)[0]:
            for rtype in from_crd(crd):
                types.setdefault((rtype.group, rtype.version, rtype.plural), rtype)
        self._types = types

    def resolve(self, group: str, version: str, plural: str) -> ResourceType:
        rtype = self._types.get((group, version, plural))
        if rtype is None:
            raise status.no_route()
        return rtype

    def types(self) -> list[ResourceType]:
        return list(self._types.values())

    def find(self, plural: str) -> ResourceType:
        """A type by plural name (first group that has it), for the ``objects()`` helper."""
        for rtype in self._types.values():
            if plural in (rtype.plural, f"{rtype.plural}.{rtype.group}"):
                return rtype
        raise KeyError(plural)

    # -- reads -----------------------------------------------------------------------

    def _present(self, rtype: ResourceType, obj: JSON) -> JSON:
        """An object as read through ``rtype``'s version (no conversion: only apiVersion)."""
        if obj.get("apiVersion") == rtype.group_version:
            return obj
        return {**obj, "apiVersion": rtype.group_version}

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> JSON:
        obj = self.store.get(rtype.key, namespace or "", name)
        if obj is None:
            raise status.not_found(rtype.group, rtype.plural, name)
        return self._present(rtype, obj)

    def list(self, rtype: ResourceType, namespace: str | None, options: ListOptions) -> JSON:
        predicate = combined(options.label_selector, options.field_selector, self.selectable_fields(rtype))
        start = ""
        if options.continue_token:
            try:
                token = json.loads(base64.urlsafe_b64decode(options.continue_token))
                snapshot_rv, start = int(token["rv"]), str(token["start"])
            except (ValueError, KeyError, TypeError):
                raise status.bad_request("continue key is not valid: incorrect encoded start resourceVersion") from None
            objects, rv = self.store.snapshot(rtype.key, namespace, snapshot_rv), snapshot_rv
        elif options.resource_version_match == "Exact" and options.resource_version:
            rv = _parse_rv(options.resource_version)
            objects = self.store.snapshot(rtype.key, namespace, rv)
        else:
            objects, rv = self.store.select(rtype.key, namespace)
        items = []
        for obj in objects:
            meta = obj["metadata"]
            if start and f"{meta.get('namespace', '')}/{meta['name']}" <= start:
                continue
            if predicate(obj):
                items.append(self._present(rtype, obj))
        metadata: JSON = {"resourceVersion": str(rv)}
        if options.limit and len(items) > options.limit:
            remaining = len(items) - options.limit
            items = items[: options.limit]
            last = items[-1]["metadata"]
            token_text = json.dumps({"rv": rv, "start": f"{last.get('namespace', '')}/{last['name']}"})
            metadata["continue"] = base64.urlsafe_b64encode(token_text.encode()).decode()
            metadata["remainingItemCount"] = remaining
        return {"kind": f"{rtype.kind}List", "apiVersion": rtype.group_version, "metadata": metadata, "items": items}

    # -- create ----------------------------------------------------------------------

    def _check_namespace(self, rtype: ResourceType, namespace: str | None, body_ns: str | None) -> str:
        if not rtype.namespaced:
            return ""
        if body_ns and namespace and body_ns != namespace:
            raise status.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        namespace = namespace or body_ns
        if not namespace:
            raise status.bad_request("an empty namespace may not be set during creation")
        ns_obj = self.store.get(NAMESPACE_KEY, "", namespace)
        if ns_obj is None:
            raise status.not_found("", "namespaces", namespace)
        if ns_obj["metadata"].get("deletionTimestamp"):
            raise status.StatusError(
                403,
                "Forbidden",
                f"{status.qualified(rtype.group, rtype.plural)} is forbidden: unable to create new content in "
                f"namespace {namespace} because it is being terminated",
                {"kind": rtype.plural, "group": rtype.group},
            )
        return namespace

    def _typed(self, rtype: ResourceType, body: Any) -> JSON:
        if not isinstance(body, dict):
            raise status.bad_request("the body of the request is not a JSON object")
        obj = copy.deepcopy(body)
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version and api_version != rtype.group_version:
            raise status.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rtype.group_version})"
            )
        if kind and kind != rtype.kind:
            raise status.bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rtype.kind})")
        obj["apiVersion"], obj["kind"] = rtype.group_version, rtype.kind
        if not isinstance(obj.get("metadata") or {}, dict):
            raise status.bad_request("metadata must be an object")
        obj["metadata"] = dict(obj.get("metadata") or {})
        return obj

    def create(self, rtype: ResourceType, namespace: str | None, body: Any, *, dry_run: bool = False) -> JSON:
        if "create" not in rtype.verbs:
            raise status.method_not_allowed("create", rtype.group, rtype.plural)
        obj = self._typed(rtype, body)
        meta = obj["metadata"]
        if meta.get("resourceVersion"):
            raise status.StatusError(500, "InternalError", "resourceVersion should not be set on objects to be created")
        ns = self._check_namespace(rtype, namespace, meta.get("namespace"))
        if ns:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(random.choices(_GENERATE_ALPHABET, k=5))
        for server_owned in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"):
            meta.pop(server_owned, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now()
        meta["generation"] = 1
        if rtype.has_status and rtype.key != CRD_KEY:
            obj.pop("status", None)  # create cannot set status where a status subresource exists
        if rtype.custom:
            crd = self._crd_of(rtype)
            if crd["metadata"].get("deletionTimestamp"):
                raise status.method_not_allowed("create", rtype.group, rtype.plural)
            obj = admit_custom(crd, obj, None, None)
        prepare_create(rtype, obj)
        validate(rtype, obj)
        if self.store.get(rtype.key, ns, obj["metadata"]["name"]) is not None:
            raise status.already_exists(rtype.group, rtype.plural, obj["metadata"]["name"])
        policies.admit(self.store, "CREATE", rtype, ns, obj["metadata"]["name"], obj, None)
        if dry_run:
            return obj
        stored = self.store.write(rtype.key, obj)
        self._after_write(rtype, stored)
        return self._present(rtype, stored)

    def _after_write(self, rtype: ResourceType, obj: JSON | None) -> None:
        if rtype.key == CRD_KEY:
            self._rebuild_types()
        if obj is None or obj["metadata"].get("ownerReferences") or obj["metadata"].get("deletionTimestamp"):
            self._on_change()

    def selectable_fields(self, rtype: ResourceType) -> tuple[str, ...]:
        """Field-selector fields beyond metadata.name/namespace: a built-in kind's, or those
        a CRD version declares in ``selectableFields``."""
        crd = self.crd_for(rtype)
        if crd is None:
            return FIELDS_BY_RESOURCE.get(rtype.key, ())
        for version in (crd.get("spec") or {}).get("versions") or []:
            if version.get("name") == rtype.version:
                return tuple(
                    f["jsonPath"].lstrip(".") for f in version.get("selectableFields") or [] if f.get("jsonPath")
                )
        return ()

    def crd_for(self, rtype: ResourceType) -> JSON | None:
        """The CRD that defines a custom resource type (None for built-ins)."""
        return self.store.get(CRD_KEY, "", rtype.crd_name) if rtype.custom else None

    def _crd_of(self, rtype: ResourceType) -> JSON:
        crd = self.store.get(CRD_KEY, "", rtype.crd_name)
        if crd is None:
            raise status.no_route()
        return crd

    # -- update and patch ------------------------------------------------------------

    def replace(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        subresource: str | None,
        *,
        dry_run: bool = False,
        create: bool = False,
    ) -> JSON:
        """PUT; with ``create``, as a client's PUT is, a missing object of a type that allows it
        is created (the emulator's own callers, the garbage collector, never create)."""
        new = self._typed(rtype, body)
        meta = new["metadata"]
        if meta.get("name") and meta["name"] != name:
            raise status.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        if rtype.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise status.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        old = self.store.get(rtype.key, namespace or "", name)
        if old is None:
            if not (create and self.creates_on_update(rtype, namespace, name, subresource)):
                raise status.not_found(rtype.group, rtype.plural, name)
            meta.pop("resourceVersion", None)  # ignored, as the server's create on update does
            meta["name"] = name
            return self.create(rtype, namespace, new, dry_run=dry_run)
        return self._update(rtype, old, new, subresource, dry_run=dry_run)

    def creates_on_update(self, rtype: ResourceType, namespace: str | None, name: str, subresource: str | None) -> bool:
        """Whether a PUT of ``name`` would create it (missing, and the type allows it)."""
        return (
            rtype.create_on_update and not subresource and self.store.get(rtype.key, namespace or "", name) is None
        )

    def patch(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        content_type: str,
        raw: bytes,
        subresource: str | None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> tuple[JSON, int]:
        """Apply a patch; returns the object and the HTTP code (201 when apply created it)."""
        kind = content_type.split(";")[0].strip()
        if kind not in patching.PATCH_TYPES:
            raise status.unsupported_media_type(content_type)
        try:
            document = yaml.safe_load(raw) if kind == patching.APPLY else json.loads(raw or b"null")
        except (ValueError, yaml.YAMLError) as error:
            raise status.bad_request(f"error decoding patch: {error}") from None
        old = self.store.get(rtype.key, namespace or "", name)
        if kind == patching.APPLY:
            if not field_manager:
                raise status.bad_request("PATCH, application/apply-patch+yaml requires fieldManager to be set")
            if old is None:
                applied = self._typed(rtype, document)
                applied["metadata"].setdefault("name", name)
                return self.create(rtype, namespace, applied, dry_run=dry_run), 201
        if old is None:
            raise status.not_found(rtype.group, rtype.plural, name)
        if kind == patching.JSON_PATCH:
            new = patching.json_patch(old, document)
        else:
            if not isinstance(document, dict):
                raise status.bad_request("the patch is not a JSON object")
            new = patching.merge_patch(old, document)
        if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
            raise status.unprocessable("the patched object is not a Kubernetes object")
        if new["metadata"].get("name", name) != name:
            raise status.bad_request("metadata.name: Invalid value: the name of a patched object cannot change")
        return self._update(rtype, old, new, subresource, dry_run=dry_run), 200

    def _update(self, rtype: ResourceType, old: JSON, new: JSON, subresource: str | None, *, dry_run: bool) -> JSON:
        if subresource not in (None, "status") or (subresource == "status" and not rtype.has_status):
            raise status.no_route()
        name = old["metadata"]["name"]
        sent_rv = new["metadata"].get("resourceVersion")
        if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
            raise status.conflict(rtype.group, rtype.plural, name)
        if subresource == "status":
            result = copy.deepcopy(old)
            if "status" in new:
                result["status"] = copy.deepcopy(new["status"])
            else:
                result.pop("status", None)
        else:
            result = copy.deepcopy(new)
            result["apiVersion"], result["kind"] = old["apiVersion"], old["kind"]
            meta = result["metadata"]
            for field_name in _IMMUTABLE_META:
                if field_name in old["metadata"]:
                    meta[field_name] = old["metadata"][field_name]
                else:
                    meta.pop(field_name, None)
            meta["name"] = name
            if "namespace" in old["metadata"]:
                meta["namespace"] = old["metadata"]["namespace"]
            if rtype.has_status:  # the main resource cannot change status
                if "status" in old:
                    result["status"] = copy.deepcopy(old["status"])
                else:
                    result.pop("status", None)
            if old["metadata"].get("deletionTimestamp"):
                added = set(meta.get("finalizers") or []) - set(old["metadata"].get("finalizers") or [])
                if added:
                    raise status.invalid(
                        rtype.kind,
                        rtype.group,
                        name,
                        [
                            (
                                "metadata.finalizers",
                                "FieldValueForbidden",
                                "metadata.finalizers: Forbidden: "
                                "no new finalizers can be added if the object is being deleted",
                            )
                        ],
                    )
            if spec_changed(rtype, old, result):
                meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        result["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if rtype.custom:
            result = admit_custom(self._crd_of(rtype), result, copy.deepcopy(old), subresource)
        if rtype.key == CRD_KEY:
            check_crd(result)
        validate(rtype, result)
        if subresource is None:
            policies.admit(self.store, "UPDATE", rtype, old["metadata"].get("namespace"), name, result, old)
        if result == old or dry_run:  # a no-op update writes nothing and keeps the resourceVersion
            return self._present(rtype, result)
        meta = result["metadata"]
        if meta.get("deletionTimestamp") and not blocking_finalizers(rtype, result):
            removed = self.store.remove(rtype.key, meta.get("namespace", ""), name)
            self._after_write(rtype, None)
            return self._present(rtype, removed or result)
        stored = self.store.write(rtype.key, result)
        self._after_write(rtype, stored)
        return self._present(rtype, stored)

    # -- delete ----------------------------------------------------------------------

    def delete(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        options: JSON | None,
        *,
        dry_run: bool = False,
    ) -> JSON:
        options = options or {}
        obj = self.store.get(rtype.key, namespace or "", name)
        if obj is None:
            raise status.not_found(rtype.group, rtype.plural, name)
        meta = obj["metadata"]
        preconditions = options.get("preconditions") or {}
        for field_name, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            wanted = preconditions.get(field_name)
            if wanted and wanted != meta[field_name]:
                why = f"Precondition failed: {label} in precondition: {wanted}, "
                why += f"{label} in object meta: {meta[field_name]}"
                raise status.conflict(rtype.group, rtype.plural, name, why)
        policy = options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is not None:
            policy = "Orphan" if options["orphanDependents"] else "Background"
        if policy not in (None, "Background", "Foreground", "Orphan"):
            raise status.invalid(
                "DeleteOptions",
                "",
                "",
                [
                    (
                        "propagationPolicy",
                        "FieldValueNotSupported",
                        f'propagationPolicy: Unsupported value: "{policy}": '
                        'supported values: "Foreground", "Background", "Orphan", "nil"',
                    )
                ],
            )
        policies.admit(self.store, "DELETE", rtype, namespace, name, None, obj)
        if dry_run:
            return self._present(rtype, obj)
        finalizers = list(meta.get("finalizers") or [])
        extra = {"Foreground": "foregroundDeletion", "Orphan": "orphan"}.get(policy or "")
        if extra and extra not in finalizers:
            finalizers.append(extra)
        pending = copy.deepcopy(obj)
        pending["metadata"]["finalizers"] = finalizers
        if not finalizers:
            pending["metadata"].pop("finalizers", None)
        if blocking_finalizers(rtype, pending):
            if meta.get("deletionTimestamp") and finalizers == list(meta.get("finalizers") or []):
                return self._present(rtype, obj)
            pending["metadata"].setdefault("deletionTimestamp", now())
            pending["metadata"].setdefault("deletionGracePeriodSeconds", 0)
            if rtype.key == NAMESPACE_KEY:
                pending["status"] = {**pending.get("status", {}), "phase": "Terminating"}
            stored = self.store.write(rtype.key, pending)
            self._after_write(rtype, stored)
            return self._present(rtype, stored)
        removed = self.store.remove(rtype.key, namespace or "", name)
        self._after_write(rtype, None)
        assert removed is not None
        if rtype.custom or rtype.key in (("", "pods"), CRD_KEY, NAMESPACE_KEY):
            return self._present(rtype, removed)  # these registries answer with the deleted object
        details = {"name": name, "kind": rtype.plural, "uid": meta["uid"]}
        if rtype.group:
            details["group"] = rtype.group
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}

    def delete_collection(
        self, rtype: ResourceType, namespace: str | None, options: ListOptions, body: JSON | None
    ) -> JSON:
        listing = self.list(rtype, namespace, ListOptions(options.label_selector, options.field_selector))
        for obj in listing["items"]:
            meta = obj["metadata"]
            try:
                self.delete(rtype, meta.get("namespace"), meta["name"], body)
            except status.StatusError as error:
                if error.code != 404:
                    raise
        return {**listing, "metadata": {"resourceVersion": str(self.store.resource_version)}}


def _parse_rv(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise status.bad_request(f'invalid resource version "{text}"') from None
