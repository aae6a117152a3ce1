"""HTTP: authentication, authorization, routing to the registry, Status error bodies.

Every response is JSON. Errors are v1 Status objects (see ``status``). Request bodies
are JSON (or YAML); protobuf bodies answer 415 (kubectl and helm must be told to send
JSON, e.g. kubectl's default for custom resources, or ``--validate=false``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import yaml
from aiohttp import web

from kubecoord_testkit.emulator import auth, discovery, policies, protobuf, status, tables, watching
from kubecoord_testkit.emulator.faults import Faults
from kubecoord_testkit.emulator.registry import ListOptions, Registry
from kubecoord_testkit.emulator.requestinfo import RecordedRequest, RequestInfo, parse
from kubecoord_testkit.emulator.resources import ResourceType
from kubecoord_testkit.emulator.selectors import combined

JSON = dict[str, Any]
_log = logging.getLogger(__name__)
_PUBLIC = ("/healthz", "/readyz", "/livez", "/version")


def _json(body: JSON, code: int = 200) -> web.Response:
    return web.Response(status=code, body=json.dumps(body).encode(), content_type="application/json")


async def _cut(request: web.Request, response: web.Response) -> web.StreamResponse:
    """Send ``response``'s status and headers and half its body, then close the connection
    (an injected fault: the client reads a body shorter than its Content-Length)."""
    body = bytes(response.body or b"")  # type: ignore[arg-type]
    cut = web.StreamResponse(status=response.status)
    cut.content_type = response.content_type
    cut.content_length = len(body)
    await cut.prepare(request)
    await cut.write(body[: len(body) // 2])
    if request.transport is not None:
        request.transport.close()
    return cut


class Router:
    """The aiohttp handler; one instance per emulator, all state on the event loop."""

    def __init__(
        self,
        registry: Registry,
        tokens: auth.Tokens,
        *,
        record: Callable[[RecordedRequest], None],
        hung: Callable[[], Awaitable[bool]],
        server_address: Callable[[], str],
        bookmark_interval: float,
        faults: Faults | None = None,
    ) -> None:
        self.registry = registry
        self.faults = faults or Faults()
        self.tokens = tokens
        self._record = record
        self._hung = hung
        self._server_address = server_address
        self._bookmark_interval = bookmark_interval

    async def handle(self, request: web.Request) -> web.StreamResponse:
        query = {key: request.query.getone(key) for key in request.query}
        info = parse(request.method, request.path, query)
        code, user = 0, None
        try:
            if await self._hung():
                # Held until hang(False) or stop(), then dropped unanswered: never processed.
                if request.transport is not None:
                    request.transport.close()
                return web.Response(status=503)
            try:
                response, user = await self._answer(request, info)
            except status.StatusError as error:
                response = _json(error.body, error.code)
            except Exception:  # a bug in the emulator: answer 500 like the server would, and log it
                _log.exception("emulator request failed", extra={"method": info.method, "path": info.path})
                response = _json(status.StatusError(500, "InternalError", "internal error in the emulator").body, 500)
            code = response.status
            if info.extra.get("cut") and isinstance(response, web.Response):
                return await _cut(request, response)
            return response
        finally:
            if not info.extra.get("recorded"):
                self._record_request(info, code, user)

    def _record_request(self, info: RequestInfo, code: int, user: str | None) -> None:
        info.extra["recorded"] = True
        self._record(
            RecordedRequest(
                method=info.method,
                path=info.path,
                query=info.query,
                verb=info.verb,
                resource=info.plural or None,
                namespace=info.namespace,
                name=info.name,
                status=code,
                watch=info.watch,
                subresource=info.subresource,
                user=user,
                group=info.group if info.plural else None,
            )
        )

    async def _answer(self, request: web.Request, info: RequestInfo) -> tuple[web.StreamResponse, str | None]:
        if request.path in _PUBLIC:
            return (_json(discovery.VERSION) if request.path == "/version" else web.Response(text="ok")), None
        identity = self.tokens.identify(request.headers.get("Authorization"))
        if identity is None:
            raise status.unauthorized()
        if not info.resource_request:
            return self._non_resource(request, info), identity.user
        try:
            rtype = self.registry.resolve(info.group, info.version, info.plural)
        except status.StatusError:
            # The API server authorizes before it looks the resource type up: without rights
            # an unknown type answers 403, like a known one (only the authorized see 404).
            self._authorize_unknown(identity, info)
            raise
        if info.namespace is not None and not rtype.namespaced:
            raise status.no_route()
        if info.verb not in rtype.verbs and info.verb not in ("update", "patch", "get"):
            raise status.method_not_allowed(info.verb, rtype.group, rtype.plural)
        if info.subresource and info.subresource not in rtype.subresources:
            raise status.no_route()
        self._authorize(identity, rtype, info)
        if self.faults.check(info):  # an injected failure (ApiEmulator.fail): answered, not processed ...
            info.extra["cut"] = True  # ... or processed, its answer cut half-way (handle)
        policies.requester.set(identity)  # this request's task: admission policies see who asks
        if info.watch:  # recorded when it starts, so that tests can see open watches
            self._record_request(info, 200, identity.user)
        return await self._resource(request, info, rtype), identity.user

    def _non_resource(self, request: web.Request, info: RequestInfo) -> web.StreamResponse:
        if request.method != "GET":
            raise status.method_not_allowed(request.method.lower(), "", "")
        types = self.registry.types()
        parts = [p for p in request.path.split("/") if p]
        document: JSON | None = None
        if parts == ["api"]:
            document = discovery.core_versions(self._server_address())
        elif parts == ["apis"]:
            document = discovery.group_list(types)
        elif len(parts) == 2 and parts[0] == "api":
            document = discovery.resource_list(types, "", parts[1])
        elif len(parts) == 2 and parts[0] == "apis":
            document = discovery.group(types, parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            document = discovery.resource_list(types, parts[1], parts[2])
        if document is None:
            raise status.no_route()
        return _json(document)

    def _authorize(self, identity: auth.Identity, rtype: ResourceType, info: RequestInfo) -> None:
        name = info.name
        if info.verb in ("list", "watch") and not name:
            for part in (info.query.get("fieldSelector") or "").split(","):
                key, _, value = part.partition("=")
                if key.strip() == "metadata.name" and value and not value.startswith("="):
                    name = value.strip()
        attrs = auth.Attributes(info.verb, rtype.group, rtype.plural, info.subresource, name, info.namespace)
        if not auth.authorize(self.registry.store, identity, attrs):
            # The API server names the object only when the URL does (not on create or list).
            raise status.forbidden(rtype.group, rtype.plural, info.name, auth.denial(identity, attrs))

    def _authorize_unknown(self, identity: auth.Identity, info: RequestInfo) -> None:
        attrs = auth.Attributes(info.verb, info.group, info.plural, info.subresource, info.name, info.namespace)
        if not auth.authorize(self.registry.store, identity, attrs):
            raise status.forbidden(info.group, info.plural, info.name, auth.denial(identity, attrs))

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        content_type = request.headers.get("Content-Type", "application/json").split(";")[0].strip()
        if not raw:
            return None
        if "protobuf" in content_type:
            try:  # client-go's Lease writes (leader election); other kinds stay 415
                return protobuf.decode(raw)
            except protobuf.Unsupported:
                raise status.unsupported_media_type(content_type) from None
        try:
            return yaml.safe_load(raw) if "yaml" in content_type else json.loads(raw)
        except (ValueError, yaml.YAMLError) as error:
            raise status.bad_request(f"error decoding the request body: {error}") from None

    async def _resource(self, request: web.Request, info: RequestInfo, rtype: ResourceType) -> web.StreamResponse:
        registry, query = self.registry, info.query
        dry_run = query.get("dryRun") == "All"
        options = ListOptions(
            label_selector=query.get("labelSelector"),
            field_selector=query.get("fieldSelector"),
            limit=int(query.get("limit") or 0),
            continue_token=query.get("continue"),
            resource_version=query.get("resourceVersion"),
            resource_version_match=query.get("resourceVersionMatch"),
        )
        verb, namespace, name = info.verb, info.namespace, info.name
        if verb == "watch":
            fields = options.field_selector
            if info.extra.get("name_filter"):
                fields = ",".join(filter(None, [fields, f"metadata.name={info.extra['name_filter']}"]))
            predicate = combined(options.label_selector, fields, registry.selectable_fields(rtype))
            return await watching.stream(
                request, registry.store, rtype, namespace, predicate, bookmark_interval=self._bookmark_interval
            )
        as_table = tables.wants_table(request.headers.get("Accept"))
        if verb == "list":
            listing = registry.list(rtype, namespace, options)
            if as_table:
                return _json(tables.table(rtype, registry.crd_for(rtype), listing["items"], listing["metadata"]))
            return _json(listing)
        if verb == "get":
            obj = registry.get(rtype, namespace, name or "")
            if as_table and not info.subresource:
                rv = obj["metadata"]["resourceVersion"]
                return _json(tables.table(rtype, registry.crd_for(rtype), [obj], {"resourceVersion": rv}))
            return _json(obj)
        if verb == "create":
            if info.subresource or (rtype.namespaced and namespace is None):
                raise status.no_route()
            return _json(registry.create(rtype, namespace, await self._body(request), dry_run=dry_run), 201)
        if verb == "update":
            body = await self._body(request)
            created = registry.creates_on_update(rtype, namespace, name or "", info.subresource)
            identity = policies.requester.get()
            if created and identity is not None:  # the server's update handler authorizes the create too
                self._authorize(identity, rtype, dataclasses.replace(info, verb="create"))
            obj = registry.replace(rtype, namespace, name or "", body, info.subresource, dry_run=dry_run, create=True)
            return _json(obj, 201 if created else 200)
        if verb == "patch":
            obj, code = registry.patch(
                rtype,
                namespace,
                name or "",
                request.headers.get("Content-Type", ""),
                await request.read(),
                info.subresource,
                dry_run=dry_run,
                field_manager=query.get("fieldManager"),
            )
            return _json(obj, code)
        if verb == "delete":
            body = await self._body(request)
            body = dict(body or {})
            if "propagationPolicy" in query:
                body.setdefault("propagationPolicy", query["propagationPolicy"])
            return _json(registry.delete(rtype, namespace, name or "", body, dry_run=dry_run))
        if verb == "deletecollection":
            return _json(registry.delete_collection(rtype, namespace, options, await self._body(request)))
        raise status.method_not_allowed(verb, rtype.group, rtype.plural)
