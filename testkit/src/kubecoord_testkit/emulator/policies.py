"""ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1): the subset kube-apiserver 1.32
applies that kubecoord's chart uses, so that the emulator answers a policy's denial as the
real server does (tests/real compares).

For every create, update (PUT or PATCH) and delete of a resource request, each stored
ValidatingAdmissionPolicy whose ``matchConstraints.resourceRules`` match (apiGroups,
apiVersions, operations, resources with ``*``; resourceNames) is evaluated once per
ValidatingAdmissionPolicyBinding naming it:

- params: ``paramRef.name`` (or ``selector``: every match) of the policy's ``paramKind``,
  in ``paramRef.namespace`` or, when that is empty, the request's namespace; none found:
  ``parameterNotFoundAction`` Allow skips the binding, Deny denies;
- ``matchConditions`` (all must be true), then ``variables`` in order, then each of
  ``validations``; CEL variables ``object``, ``oldObject`` (null on create / on delete),
  ``request`` (operation, name, namespace, userInfo.username and groups, kind, resource),
  ``params``, ``variables``;
- a validation that is false denies with its ``message`` or ``messageExpression`` and its
  ``reason`` (Forbidden 403, Invalid 422 — the default, Unauthorized 401,
  RequestEntityTooLarge 413), worded as the API server words it; an expression error obeys
  ``failurePolicy`` (Fail, the default: 422 naming the expression and its error; Ignore);
- ``validationActions`` Deny denies; Warn and Audit alone admit.

Not emulated: the binding's ``matchResources`` (namespace and object selectors), the
policy's ``excludeResourceRules``, ``auditAnnotations``, ``authorizer`` and
``namespaceObject`` in expressions, type checking when a policy is created, cost limits.
Requests of the emulator's own (garbage collector, namespace finalizer) are not admitted.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any

import celpy.adapter
import celpy.celtypes as ct

from kubecoord_testkit.emulator.admission.cel_rules import _evaluate, _RuleError
from kubecoord_testkit.emulator.auth import Identity
from kubecoord_testkit.emulator.resources import ResourceType
from kubecoord_testkit.emulator.status import StatusError
from kubecoord_testkit.emulator.store import Store

JSON = dict[str, Any]
GROUP = "admissionregistration.k8s.io"
POLICIES = (GROUP, "validatingadmissionpolicies")
BINDINGS = (GROUP, "validatingadmissionpolicybindings")
REASONS = {"Forbidden": 403, "Invalid": 422, "Unauthorized": 401, "RequestEntityTooLarge": 413}

requester: contextvars.ContextVar[Identity | None] = contextvars.ContextVar("requester", default=None)
"""Who makes the request being served (set by the router around a write); None: the emulator."""


def _listed(values: list[str] | None, value: str) -> bool:
    return bool(values) and ("*" in (values or []) or value in (values or []))


def _matches(policy: JSON, operation: str, rtype: ResourceType, name: str) -> bool:
    constraints = (policy.get("spec") or {}).get("matchConstraints") or {}
    for rule in constraints.get("resourceRules") or []:
        if (_listed(rule.get("apiGroups"), rtype.group) and _listed(rule.get("apiVersions"), rtype.version)
                and _listed(rule.get("operations"), operation) and _listed(rule.get("resources"), rtype.plural)
                and (not rule.get("resourceNames") or name in rule["resourceNames"])):
            return True
    return False


def _params(store: Store, policy: JSON, binding: JSON, namespace: str) -> list[JSON] | None:
    """The binding's parameter objects; None when there are none to find (or no paramRef)."""
    kind = (policy.get("spec") or {}).get("paramKind")
    ref = (binding.get("spec") or {}).get("paramRef")
    if not kind or not ref:
        return None
    plural = {"ConfigMap": "configmaps", "Secret": "secrets"}.get(kind.get("kind", ""), "")
    group = kind.get("apiVersion", "v1").rpartition("/")[0]
    where = ref.get("namespace") or namespace
    if ref.get("name"):
        found = store.get((group, plural), where, ref["name"])
        return [found] if found is not None else []
    return list(store.select((group, plural), where)[0])


def _request(identity: Identity, operation: str, rtype: ResourceType, namespace: str, name: str) -> JSON:
    request: JSON = {
        "operation": operation, "namespace": namespace,
        "userInfo": {"username": identity.user, "groups": list(identity.groups)},
        "kind": {"group": rtype.group, "version": rtype.version, "kind": rtype.kind},
        "resource": {"group": rtype.group, "version": rtype.version, "resource": rtype.plural},
    }
    if name:
        request["name"] = name
    return request


def admit(store: Store, operation: str, rtype: ResourceType, namespace: str | None, name: str,
          obj: JSON | None, old: JSON | None) -> None:
    """Raise the API server's StatusError when a bound policy denies this write."""
    identity = requester.get()
    if identity is None:
        return
    policies = store.select(POLICIES, None)[0]
    if not policies:
        return
    for policy in policies:
        if not _matches(policy, operation, rtype, name):
            continue
        policy_name = policy["metadata"]["name"]
        for binding in store.select(BINDINGS, None)[0]:
            spec = binding.get("spec") or {}
            if spec.get("policyName") != policy_name or "Deny" not in (spec.get("validationActions") or []):
                continue
            params = _params(store, policy, binding, namespace or "")
            if params == []:
                if (spec.get("paramRef") or {}).get("parameterNotFoundAction", "Deny") == "Allow":
                    continue
                raise _denial(rtype, name, policy_name, binding["metadata"]["name"],
                              "failed to configure binding: no params found for policy binding with "
                              "`Deny` parameterNotFoundAction", "Invalid")
            candidates: list[JSON | None] = list(params) if params is not None else [None]
            for param in candidates:
                _validate(policy, binding, rtype, name, {
                    "object": obj, "oldObject": old, "params": param,
                    "request": _request(identity, operation, rtype, namespace or "", name),
                })


def _validate(policy: JSON, binding: JSON, rtype: ResourceType, name: str, inputs: JSON) -> None:
    spec = policy.get("spec") or {}
    fail = spec.get("failurePolicy", "Fail") == "Fail"
    activation: dict[str, Any] = {key: celpy.adapter.json_to_cel(value) for key, value in inputs.items()}
    names = (policy["metadata"]["name"], binding["metadata"]["name"])
    try:
        for condition in spec.get("matchConditions") or []:
            if not bool(_evaluate(condition["expression"], activation)):
                return
        variables: dict[str, Any] = {}
        for variable in spec.get("variables") or []:
            activation["variables"] = _variables_map(variables)  # those defined so far
            variables[variable["name"]] = _evaluate(variable["expression"], activation)
        activation["variables"] = _variables_map(variables)
    except _RuleError as error:
        if fail:
            raise _denial(rtype, name, *names, f"expression error: {error}", "Invalid") from None
        return
    for validation in spec.get("validations") or []:
        expression = validation["expression"]
        try:
            allowed = bool(_evaluate(expression, activation))
        except _RuleError as error:
            if fail:
                raise _denial(rtype, name, *names,
                              f"expression '{expression}' resulted in error: {error}", "Invalid") from None
            continue
        if allowed:
            continue
        message = validation.get("message") or f"failed expression: {expression}"
        if validation.get("messageExpression"):
            with contextlib.suppress(_RuleError):  # the API server falls back to the static message
                message = str(_evaluate(validation["messageExpression"], activation))
        raise _denial(rtype, name, *names, message, validation.get("reason") or "Invalid")


def _variables_map(variables: dict[str, Any]) -> Any:
    return ct.MapType({ct.StringType(key): value for key, value in variables.items()})


def _denial(rtype: ResourceType, name: str, policy: str, binding: str, message: str, reason: str) -> StatusError:
    resource = f"{rtype.plural}.{rtype.group}" if rtype.group else rtype.plural
    text = (f'{resource} "{name or "Unknown"}" is forbidden: ValidatingAdmissionPolicy \'{policy}\' with binding '
            f"'{binding}' denied request: {message}")
    code = REASONS.get(reason, 422)
    details: JSON = {"name": name, "kind": rtype.plural}
    if rtype.group:
        details["group"] = rtype.group
    return StatusError(code, reason, text, details=details)
