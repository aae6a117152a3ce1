"""A tiny kopf operator for the emulator test: it marks each Gadget Ready in its status
and cleans up (through its finalizer) on delete. The kubeconfig comes from the path in
KUBECOORD_TEST_KUBECONFIG, never from KUBECONFIG."""

from __future__ import annotations

import os
from typing import Any

import kopf
import yaml

GROUP, VERSION, PLURAL = "example.kubecoord.dev", "v1", "gadgets"


@kopf.on.login()
def login(**_: Any) -> kopf.ConnectionInfo:
    with open(os.environ["KUBECOORD_TEST_KUBECONFIG"]) as file:
        config = yaml.safe_load(file)
    return kopf.ConnectionInfo(
        server=config["clusters"][0]["cluster"]["server"],
        scheme="Bearer",
        token=config["users"][0]["user"]["token"],
        default_namespace="default",
    )


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.watching.server_timeout = 30


@kopf.on.create(GROUP, VERSION, PLURAL)
def created(spec: dict[str, Any], body: kopf.Body, patch: kopf.Patch, **_: Any) -> dict[str, Any]:
    patch.status["phase"] = "Ready"
    kopf.info(body, reason="Created", message="gadget is ready")
    return {"size": spec.get("size", 0) * 2}


@kopf.on.update(GROUP, VERSION, PLURAL, field="spec.size")
def resized(new: int, patch: kopf.Patch, **_: Any) -> None:
    patch.status["observedSize"] = new


@kopf.on.delete(GROUP, VERSION, PLURAL)
def deleted(name: str, body: kopf.Body, **_: Any) -> None:
    kopf.info(body, reason="CleanedUp", message=f"{name} cleaned up")
