"""The options of cassandra:// (the table is in the package docstring), checked before any request."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kubecoord.errors import InvalidArgumentError
from kubecoord.timings import DEFAULT_SESSION_LEASE, Timings

QUORUM_LEVELS = ("QUORUM", "LOCAL_QUORUM", "EACH_QUORUM", "ALL")
"""Consistency levels allowed for reads and LWT commits: a read must overlap the quorum an
LWT wrote to, or a reader could miss an acknowledged write."""
SERIAL_LEVELS = ("SERIAL", "LOCAL_SERIAL")
TTL_GRANULARITY = 1.0
"""Cassandra counts TTLs in whole seconds of its own clock: a cell written at 10.9 s with
TTL 3 expires at 13.0 s, only 2.1 s later. Leases must end that much before the TTL."""


@dataclass(frozen=True, slots=True)
class Options:
    session_timeout: int = int(DEFAULT_SESSION_LEASE)
    renew_deadline: float | None = None
    retry_period: float | None = None
    poll_period: float = 0.5
    consistency: str = "QUORUM"
    serial_consistency: str = "SERIAL"
    replication_factor: int = 1
    replication: dict[str, Any] | None = None
    connect_timeout: float = 10.0
    request_timeout: float = 5.0
    username: str | None = None
    password: str | None = None
    ssl: dict[str, Any] | None = None
    max_value_bytes: int = 1024 * 1024
    create_schema: bool = True

    @property
    def timings(self) -> Timings:
        """The lease core's timings: lease_duration is the TTL; the renew deadline ends more
        than the TTL's one-second granularity before the row can expire."""
        ttl = float(self.session_timeout)
        renew_deadline = self.renew_deadline if self.renew_deadline is not None else (ttl - TTL_GRANULARITY) * 0.75
        retry_period = self.retry_period if self.retry_period is not None else min(2.0, ttl / 10)
        timings = Timings(lease_duration=ttl, renew_deadline=renew_deadline, retry_period=retry_period)
        if not renew_deadline < ttl - TTL_GRANULARITY:
            raise InvalidArgumentError(
                f"cassandra backend: renew_deadline ({renew_deadline} s) must be less than session_timeout - 1 "
                f"({ttl - TTL_GRANULARITY} s): Cassandra's TTLs have one-second granularity"
            )
        return timings

    @property
    def heartbeat_period(self) -> float:
        """Group members renew their rows this often (a third of the TTL)."""
        return self.session_timeout / 3

    @property
    def replication_map(self) -> dict[str, Any]:
        if self.replication is not None:
            return dict(self.replication)
        return {"class": "SimpleStrategy", "replication_factor": self.replication_factor}


def _number(name: str, value: Any, *, minimum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < minimum:
        raise InvalidArgumentError(f"cassandra backend: {name} must be a number >= {minimum}, got {value!r}")
    return float(value)


def parse(options: dict[str, Any]) -> Options:
    """Options from connect()'s keyword arguments; InvalidArgumentError on anything wrong."""
    known = set(Options.__dataclass_fields__)
    unknown = sorted(set(options) - known)
    if unknown:
        raise InvalidArgumentError(f"cassandra backend: unknown options {unknown}; known: {sorted(known)}")
    values = dict(options)
    if "session_timeout" in values:
        timeout = values["session_timeout"]
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout != int(timeout) or timeout < 2:
            raise InvalidArgumentError(
                f"cassandra backend: session_timeout must be a whole number of seconds >= 2 (a TTL), got {timeout!r}"
            )
        values["session_timeout"] = int(timeout)
    for name in ("renew_deadline", "retry_period"):
        if values.get(name) is not None:
            values[name] = _number(name, values[name], minimum=0.01)
    for name in ("poll_period", "connect_timeout", "request_timeout"):
        if name in values:
            values[name] = _number(name, values[name], minimum=0.01)
    for name, allowed in (("consistency", QUORUM_LEVELS), ("serial_consistency", SERIAL_LEVELS)):
        if name in values:
            level = values[name]
            if not isinstance(level, str) or level.upper() not in allowed:
                raise InvalidArgumentError(f"cassandra backend: {name} must be one of {allowed}, got {level!r}")
            values[name] = level.upper()
    if "replication_factor" in values:
        factor = values["replication_factor"]
        if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
            raise InvalidArgumentError(f"cassandra backend: replication_factor must be an int >= 1, got {factor!r}")
    if values.get("replication") is not None:
        replication = values["replication"]
        if not isinstance(replication, dict) or "class" not in replication:
            raise InvalidArgumentError(
                "cassandra backend: replication must be a dict with a 'class', e.g. "
                "{'class': 'NetworkTopologyStrategy', 'dc1': 3}"
            )
        for key, value in replication.items():
            if not isinstance(key, str) or not isinstance(value, str | int) or "'" in str(value) or "'" in key:
                raise InvalidArgumentError(f"cassandra backend: replication entry {key!r}: {value!r} is not valid")
    for name in ("username", "password"):
        if values.get(name) is not None and not isinstance(values[name], str):
            raise InvalidArgumentError(f"cassandra backend: {name} must be a str")
    if (values.get("username") is None) != (values.get("password") is None):
        raise InvalidArgumentError("cassandra backend: username and password go together")
    if values.get("ssl") is not None:
        ssl = values["ssl"]
        allowed_ssl = {"ca_file", "certfile", "keyfile", "check_hostname"}
        if not isinstance(ssl, dict) or set(ssl) - allowed_ssl:
            raise InvalidArgumentError(f"cassandra backend: ssl must be a dict with keys among {sorted(allowed_ssl)}")
    if "max_value_bytes" in values:
        size = values["max_value_bytes"]
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 8 * 1024 * 1024:
            raise InvalidArgumentError(f"cassandra backend: max_value_bytes must be an int in 1..8 MiB, got {size!r}")
    if "create_schema" in values and not isinstance(values["create_schema"], bool):
        raise InvalidArgumentError("cassandra backend: create_schema must be a bool")
    parsed = Options(**values)
    parsed.timings  # noqa: B018 - validates the timing rules now, before any request
    return parsed
