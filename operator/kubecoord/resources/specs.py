"""What the spec of a LeaderElection, Group or KVStore says.

The API server has validated and defaulted a spec already; where a field is absent (a
resource written before its default existed, or stored without admission) the CRD's
default applies, here and nowhere else. Unknown fields are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubecoord.errors import InvalidArgumentError
from kubecoord.resources.quantities import parse_quantity
from kubecoord.timings import DEFAULT_LEASE_DURATION, DEFAULT_RENEW_INTERVAL, DEFAULT_SESSION_LEASE

# The CRDs' defaults (crds/*.yaml) that are not timings (those are kubecoord.timings').
DEFAULT_SIZE_LIMIT = "1Mi"
DEFAULT_ZOOKEEPER_CHROOT = "/kubecoord"
DEFAULT_CASSANDRA_KEYSPACE = "kubecoord"
DEFAULT_ETCD_PREFIX = "kubecoord"


@dataclass(frozen=True, slots=True)
class Credentials:
    """Where a connection's secrets come from: the Secret ``secret`` (None: none) of the
    resource's namespace, named by the spec's ``field``, and whether it speaks TLS."""

    namespace: str
    secret: str | None
    tls: bool
    field: str


@dataclass(frozen=True, slots=True)
class BackendSpec:
    """Which backend a resource lives in, as a connect() URL plus options."""

    backend: str
    url: str
    options: tuple[tuple[str, Any], ...] = field(default=())
    credentials: Credentials | None = None
    """Username, password and TLS files come from a Secret (kubecoord.resources.credentials)."""

    @classmethod
    def from_spec(cls, spec: dict[str, Any], *, namespace: str) -> BackendSpec:
        """The backend of ``spec``; InvalidArgumentError for one that cannot be connected to."""
        backend = spec.get("backend", "kubernetes")
        if backend == "kubernetes":
            return cls(backend=backend, url=f"kubernetes://{namespace}")
        if backend == "zookeeper":
            zookeeper, hosts = _settings(spec, "zookeeper")
            chroot = str(zookeeper.get("chroot", DEFAULT_ZOOKEEPER_CHROOT)).strip("/")
            timeout = float(zookeeper.get("sessionTimeoutSeconds", DEFAULT_SESSION_LEASE))
            return cls(backend=backend, url=f"zookeeper://{hosts}/{chroot}", options=(("lease_duration", timeout),))
        if backend == "cassandra":
            cassandra, hosts = _settings(spec, "cassandra")
            keyspace = str(cassandra.get("keyspace", DEFAULT_CASSANDRA_KEYSPACE))
            options: list[tuple[str, Any]] = [
                ("lease_duration", int(cassandra.get("sessionTimeoutSeconds", DEFAULT_SESSION_LEASE))),
                ("consistency", str(cassandra.get("consistency", "QUORUM"))),
                ("serial_consistency", str(cassandra.get("serialConsistency", "SERIAL"))),
            ]
            if cassandra.get("renewDeadlineSeconds") is not None:
                options.append(("renew_deadline", float(cassandra["renewDeadlineSeconds"])))
            return cls(backend=backend, url=f"cassandra://{hosts}/{keyspace}", options=tuple(options))
        if backend == "etcd":
            etcd, hosts = _settings(spec, "etcd")
            prefix = str(etcd.get("prefix", DEFAULT_ETCD_PREFIX)).strip("/")
            options = [("lease_duration", int(etcd.get("sessionTimeoutSeconds", DEFAULT_SESSION_LEASE)))]
            if etcd.get("renewDeadlineSeconds") is not None:
                options.append(("renew_deadline", float(etcd["renewDeadlineSeconds"])))
            secret, tls = etcd.get("secretName"), bool(etcd.get("tls", False))
            credentials = Credentials(namespace=namespace, secret=None if secret is None else str(secret), tls=tls,
                                      field="spec.etcd.secretName") if secret is not None or tls else None
            return cls(backend=backend, url=f"etcd://{hosts}" + (f"/{prefix}" if prefix else ""),
                       options=tuple(options), credentials=credentials)
        raise InvalidArgumentError(f"spec.backend: unsupported backend {backend!r}")


def _settings(spec: dict[str, Any], backend: str) -> tuple[dict[str, Any], str]:
    """spec.BACKEND and its hosts joined by ',' (a URL's location); InvalidArgumentError without hosts."""
    settings = dict(spec.get(backend) or {})
    hosts = ",".join(settings.get("hosts") or [])
    if not hosts:
        raise InvalidArgumentError(f"spec.{backend}.hosts is required when spec.backend is {backend}")
    return settings, hosts


def election_timing_overrides(spec: dict[str, Any]) -> dict[str, float | None]:
    """A LeaderElection's timings as Timings.with_overrides() arguments: seconds, or None
    where the spec does not say (the client's own timings apply)."""
    return {
        "lease_duration": _seconds(spec.get("leaseDurationSeconds")),
        "renew_deadline": _seconds(spec.get("renewDeadlineSeconds")),
        "retry_period": _seconds(spec.get("retryPeriodSeconds")),
    }


def member_timings(spec: dict[str, Any]) -> tuple[float, float]:
    """A Group member's (lease duration, renew interval) in seconds."""
    lease = _seconds(spec.get("leaseDurationSeconds"))
    interval = _seconds(spec.get("renewIntervalSeconds"))
    return (
        DEFAULT_LEASE_DURATION if lease is None else lease,
        DEFAULT_RENEW_INTERVAL if interval is None else interval,
    )


def size_limit_bytes(spec: dict[str, Any]) -> int:
    """A KVStore's spec.sizeLimit in bytes; InvalidArgumentError if it is not a quantity."""
    raw = spec.get("sizeLimit", DEFAULT_SIZE_LIMIT)
    limit = parse_quantity(raw)
    if limit is None:
        raise InvalidArgumentError(f"spec.sizeLimit: {raw!r} is not a quantity like 512Ki or 1Mi")
    return limit


def _seconds(value: Any) -> float | None:
    return None if value is None else float(value)
