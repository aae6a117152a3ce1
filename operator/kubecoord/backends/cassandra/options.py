"""The options of cassandra:// (the table is in the package docstring), checked before any request."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kubecoord import validation
from kubecoord.errors import InvalidArgumentError
from kubecoord.timings import DEFAULT_SESSION_LEASE, TIMING_NAMES, Timings

QUORUM_LEVELS = ("QUORUM", "LOCAL_QUORUM", "EACH_QUORUM", "ALL")
"""Consistency levels allowed for reads and LWT commits: a read must overlap the quorum an
LWT wrote to, or a reader could miss an acknowledged write."""
SERIAL_LEVELS = ("SERIAL", "LOCAL_SERIAL")
TTL_GRANULARITY = 1.0
"""Cassandra counts TTLs in whole seconds of its own clock: a cell written at 10.9 s with
TTL 3 expires at 13.0 s, only 2.1 s later. Leases must end that much before the TTL."""


@dataclass(frozen=True, slots=True)
class Options:
    lease_duration: int = int(DEFAULT_SESSION_LEASE)
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
        return lease_timings(self.lease_duration, self.renew_deadline, self.retry_period)

    def election_timings(self, **overrides: Any) -> Timings:
        """One election's timings (leader_election()'s lease_duration, renew_deadline,
        retry_period; the others derived as for connect() when lease_duration is given)."""
        unknown = sorted(set(overrides) - set(TIMING_NAMES))
        if unknown:
            raise InvalidArgumentError(f"cassandra backend: unknown timing options {unknown}; the timings are "
                                       f"{list(TIMING_NAMES)}")
        if overrides.get("lease_duration") is None:
            return lease_timings(self.lease_duration, overrides.get("renew_deadline", self.renew_deadline),
                                 overrides.get("retry_period", self.retry_period))
        return lease_timings(_ttl(overrides["lease_duration"]), overrides.get("renew_deadline"),
                             overrides.get("retry_period"))

    @property
    def heartbeat_period(self) -> float:
        """Group members renew their rows this often (a third of the TTL)."""
        return self.lease_duration / 3

    @property
    def replication_map(self) -> dict[str, Any]:
        if self.replication is not None:
            return dict(self.replication)
        return {"class": "SimpleStrategy", "replication_factor": self.replication_factor}


def lease_timings(ttl: int, renew_deadline: float | None, retry_period: float | None) -> Timings:
    """Timings over a row TTL of ``ttl`` seconds: renew_deadline (default (ttl - 1) x 0.75) must
    end before the TTL's one-second granularity can expire the row; retry_period default
    min(2, ttl / 10)."""
    renew = _number("renew_deadline", renew_deadline, minimum=0.01) if renew_deadline is not None else (
        (ttl - TTL_GRANULARITY) * 0.75)
    retry = _number("retry_period", retry_period, minimum=0.01) if retry_period is not None else min(2.0, ttl / 10)
    timings = Timings(lease_duration=float(ttl), renew_deadline=renew, retry_period=retry)
    if not renew < ttl - TTL_GRANULARITY:
        raise InvalidArgumentError(
            f"cassandra backend: renew_deadline ({renew} s) must be less than lease_duration - 1 "
            f"({ttl - TTL_GRANULARITY} s): Cassandra's TTLs have one-second granularity"
        )
    return timings


def _ttl(value: Any) -> int:
    return validation.check_ttl(value, "cassandra backend: lease_duration")


def _number(name: str, value: Any, *, minimum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < minimum:
        raise InvalidArgumentError(f"cassandra backend: {name} must be a number >= {minimum}, got {value!r}")
    return float(value)


def parse(options: dict[str, Any]) -> Options:
    """Options from connect()'s keyword arguments; InvalidArgumentError on anything wrong."""
    validation.check_option_names(options, set(Options.__dataclass_fields__), "cassandra")
    values = dict(options)
    if "lease_duration" in values:
        values["lease_duration"] = _ttl(values["lease_duration"])
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
    validation.check_credentials(values, "cassandra")
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
