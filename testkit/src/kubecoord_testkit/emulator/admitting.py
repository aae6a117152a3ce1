"""The one call site of the custom-resource admission hook.

``kubecoord_testkit.emulator.admission`` (a separate, pure module) applies a CRD's schema
defaults and validation (openAPIV3Schema, x-kubernetes-validations):

    admit(crd: dict, obj: dict, old: dict | None, subresource: str | None) -> dict
    raises admission.Invalid(status_body)   # a 422 Status body

The registry calls ``admit_custom`` for every create, update and patch of a custom
resource (main resource and subresources), after the server-side preparation (metadata,
status stripping, generation) and before the built-in validation and the write. When
the module is not installed, custom resources are stored unvalidated.
"""

from __future__ import annotations

import importlib
import logging
from types import ModuleType
from typing import Any

from kubecoord_testkit.emulator.status import StatusError

JSON = dict[str, Any]
MODULE = "kubecoord_testkit.emulator.admission"
_log = logging.getLogger(__name__)
_cached: list[ModuleType | None] = []


def _module() -> ModuleType | None:
    if not _cached:
        try:
            _cached.append(importlib.import_module(MODULE))
        except ModuleNotFoundError as error:
            if error.name != MODULE:
                raise  # the module exists but one of its own imports is missing: say so
            _log.info("no admission module; custom resources are stored unvalidated")
            _cached.append(None)
    return _cached[0]


def admit_custom(crd: JSON, obj: JSON, old: JSON | None, subresource: str | None) -> JSON:
    """The object as admitted (defaults applied), or StatusError 422 when invalid."""
    module = _module()
    if module is None:
        return obj
    try:
        admitted: JSON = module.admit(crd, obj, old, subresource)
    except module.Invalid as error:
        body = getattr(error, "status_body", None) or (error.args[0] if error.args else {})
        raise StatusError.from_body(dict(body)) from None
    return admitted
