"""Admission of custom resources as kube-apiserver's apiextensions-apiserver does it.

``admit(crd, obj, old, subresource)`` returns the object as the API server would store
it, or raises ``Invalid`` carrying the v1 Status (422, reason Invalid) the server
answers, with one cause per field error. The steps, in the server's order:

1. Status subresource: on create the status is dropped; an update of the main resource
   keeps the old status; an update of ``/status`` keeps everything but the status (and
   the new resourceVersion, so the caller's optimistic-concurrency check still sees it).
2. Pruning: fields the schema does not declare are dropped, unless a node says
   ``x-kubernetes-preserve-unknown-fields: true``. ``apiVersion``, ``kind`` and
   ``metadata`` of the resource (and of ``x-kubernetes-embedded-resource`` nodes) are kept.
3. Defaulting: ``default`` values are filled in where a field is absent (or null and not
   nullable), recursively, so defaults inside a defaulted object apply too; other
   non-nullable nulls are dropped.
4. Validation of the structural schema: type, required, enum, pattern, minimum /
   maximum (exclusive), multipleOf, minLength / maxLength, minItems / maxItems,
   uniqueItems, list-type set / map uniqueness, min/maxProperties, simple formats,
   allOf / anyOf / oneOf / not.
5. ``x-kubernetes-validations`` CEL rules (cel-python), with ``self`` typed from the
   schema (``number`` is a double, ``integer`` an int, ``format: duration`` / ``date-time``
   are durations / timestamps, property names escaped as Kubernetes does) and
   ``oldSelf`` on updates. Transition rules (those using ``oldSelf``) run only where an
   old value exists. ``message``, ``messageExpression``, ``fieldPath`` and ``reason`` are
   honoured. As in the server, the rules are skipped when step 4 found a type error.
   cel-python interprets a rule in about a millisecond, so results are remembered
   (bounded LRU) by expression, node schema and the top-level fields the rule reads: a
   status write re-checks an unchanged spec from memory (bench/bench_admission.py).

Messages follow apimachinery's ``field.Error`` and kube-openapi's wording as of
Kubernetes 1.32, e.g. ``LeaderElection.kubecoord.dev "billing" is invalid:
spec.renewDeadlineSeconds: Invalid value: "object": renewDeadlineSeconds must be less
than leaseDurationSeconds`` (a rule's failure shows the type of the node it is declared
on; 1.35 shows scalar values instead).

Not guaranteed: CEL type checking at CRD creation (a rule naming an undeclared field
fails at admission with "no such key" instead of being refused with the CRD), cost
budgets, validation ratcheting of unchanged fields, ``optionalOldSelf``, the
``fieldValidation=Strict`` query parameter (unknown fields are always pruned silently),
metadata pruning and generation bookkeeping (the emulator's business). The CEL library
covers the standard functions plus Kubernetes' string (lowerAscii, upperAscii, trim,
replace, split, join, indexOf, lastIndexOf, substring, charAt), list (sum, min, max,
isSorted) and regex (find, findAll) extensions and cross-type numeric comparisons.
"""

from kubecoord_testkit.emulator.admission.admit import admit
from kubecoord_testkit.emulator.admission.field_errors import Invalid

__all__ = ["Invalid", "admit"]
