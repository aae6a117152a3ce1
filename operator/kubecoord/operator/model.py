"""The three custom resources: group/version/plural names and typed views of their specs.

Guarantees: ``BackendSpec.from_spec`` accepts exactly what the CRD's schema admits (the API
server has validated and defaulted it already) and turns it into connect() arguments;
unknown fields are ignored, missing ones take the CRD's defaults so that a resource
written before a default existed still works.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kubecoord.errors import InvalidArgumentError

GROUP = "kubecoord.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

KINDS = {"leaderelections": "LeaderElection", "groups": "Group", "kvstores": "KVStore"}
"""plural -> kind."""
PLURALS = {kind: plural for plural, kind in KINDS.items()}
"""kind -> plural."""

_QUANTITY = re.compile(r"^([1-9][0-9]*)(Ki|Mi|Gi)?$")
_UNITS = {None: 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}


@dataclass(frozen=True, slots=True)
class BackendSpec:
    """Which backend a resource lives in, as a connect() URL plus options."""

    backend: str
    url: str
    options: tuple[tuple[str, Any], ...] = field(default=())

    @classmethod
    def from_spec(cls, spec: dict[str, Any], *, namespace: str) -> BackendSpec:
        backend = spec.get("backend", "kubernetes")
        if backend == "kubernetes":
            return cls(backend=backend, url=f"kubernetes://{namespace}")
        if backend == "zookeeper":
            zookeeper = spec.get("zookeeper") or {}
            hosts = ",".join(zookeeper.get("hosts") or [])
            if not hosts:
                raise InvalidArgumentError("spec.zookeeper.hosts is required when spec.backend is zookeeper")
            chroot = str(zookeeper.get("chroot", "/kubecoord")).strip("/")
            timeout = float(zookeeper.get("sessionTimeoutSeconds", 10))
            return cls(backend=backend, url=f"zookeeper://{hosts}/{chroot}", options=(("session_timeout", timeout),))
        raise InvalidArgumentError(f"spec.backend: unsupported backend {backend!r}")


def election_timings(spec: dict[str, Any]) -> dict[str, float]:
    """The LeaderElection timings as keyword options (seconds)."""
    return {
        "lease_duration": float(spec.get("leaseDurationSeconds", 15)),
        "renew_deadline": float(spec.get("renewDeadlineSeconds", 10)),
        "retry_period": float(spec.get("retryPeriodSeconds", 2)),
    }


def group_timings(spec: dict[str, Any]) -> dict[str, float]:
    """The Group member timings as keyword options (seconds)."""
    return {
        "lease_duration": float(spec.get("leaseDurationSeconds", 15)),
        "renew_interval": float(spec.get("renewIntervalSeconds", 5)),
    }


def size_limit_bytes(spec: dict[str, Any]) -> int:
    """spec.sizeLimit (a quantity without decimals) in bytes."""
    raw = str(spec.get("sizeLimit", "1Mi"))
    match = _QUANTITY.match(raw)
    if match is None:
        raise InvalidArgumentError(f"spec.sizeLimit: {raw!r} is not a quantity like 512Ki or 1Mi")
    return int(match.group(1)) * _UNITS[match.group(2)]


def human_bytes(count: int) -> str:
    """Bytes in the units kubectl shows for quantities: 0, 512, 1.5Ki, 12.0Mi."""
    if count < 1024:
        return str(count)
    for unit, factor in (("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if count >= factor:
            return f"{count / factor:.1f}{unit}"
    return str(count)  # pragma: no cover - unreachable


def owner_reference(body: dict[str, Any]) -> dict[str, Any]:
    """An ownerReference to a custom resource, so Kubernetes' GC deletes what it owns."""
    return {
        "apiVersion": body.get("apiVersion", API_VERSION),
        "kind": body["kind"],
        "name": body["metadata"]["name"],
        "uid": body["metadata"]["uid"],
        "controller": True,
    }
