"""The options of etcd:// (the table is in the package docstring), checked before any request."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kubecoord import validation
from kubecoord.errors import InvalidArgumentError
from kubecoord.timings import DEFAULT_REQUEST_TIMEOUT, DEFAULT_SESSION_LEASE, TIMING_NAMES

DEFAULT_PORT = 2379
CLOCK_MARGIN = 1.0
"""etcd counts lease TTLs in whole seconds, from when its leader applied the keep-alive;
a lease holder stops believing in its lease at least this long before the TTL ends."""
_PREFIX = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")
_TLS_KEYS = frozenset({"ca_file", "certfile", "keyfile"})


@dataclass(frozen=True, slots=True)
class Options:
    lease_duration: int = int(DEFAULT_SESSION_LEASE)
    renew_deadline: float | None = None
    retry_period: float | None = None
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    username: str | None = None
    password: str | None = None
    tls: dict[str, str] | None = None
    max_value_bytes: int = 1024 * 1024

    @property
    def deadline(self) -> float:
        """Seconds a session holder acts on its lease after the last keep-alive it *sent*
        that was answered: strictly less than the TTL minus the clock margin."""
        if self.renew_deadline is not None:
            return self.renew_deadline
        return (self.lease_duration - CLOCK_MARGIN) * 0.75

    @property
    def period(self) -> float:
        """Seconds between keep-alives."""
        return self.retry_period if self.retry_period is not None else self.deadline / 4

    def with_timings(self, **overrides: Any) -> Options:
        """These options with some of lease_duration, renew_deadline, retry_period replaced
        (a handle's own timings); checked as connect()'s are."""
        unknown = sorted(set(overrides) - set(TIMING_NAMES))
        if unknown:
            raise InvalidArgumentError(f"etcd backend: a handle takes only {list(TIMING_NAMES)}, got {unknown}")
        mine = {name: getattr(self, name) for name in self.__dataclass_fields__}
        return parse({**mine, **{k: v for k, v in overrides.items() if v is not None}})

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"


def _seconds(options: dict[str, Any], name: str) -> float | None:
    value = options.get(name)
    return None if value is None else validation.check_seconds(value, f"etcd backend: {name}")


def parse(options: dict[str, Any]) -> Options:
    """The connect() options as Options, or InvalidArgumentError naming the bad one."""
    validation.check_option_names(options, set(Options.__dataclass_fields__), "etcd")
    ttl = validation.check_ttl(options.get("lease_duration", int(DEFAULT_SESSION_LEASE)),
                               "etcd backend: lease_duration")
    renew_deadline = _seconds(options, "renew_deadline")
    retry_period = _seconds(options, "retry_period")
    request_timeout = _seconds(options, "request_timeout") or DEFAULT_REQUEST_TIMEOUT
    validation.check_credentials(options, "etcd")
    tls = options.get("tls")
    if tls is not None and (
        not isinstance(tls, dict) or not set(tls) <= _TLS_KEYS or not all(isinstance(v, str) for v in tls.values())
        or ("certfile" in tls) != ("keyfile" in tls)
    ):
        raise InvalidArgumentError(
            f"etcd backend: tls must be a dict of {sorted(_TLS_KEYS)} (paths; certfile and keyfile together), "
            f"got {tls!r}"
        )
    max_value_bytes = options.get("max_value_bytes", 1024 * 1024)
    if isinstance(max_value_bytes, bool) or not isinstance(max_value_bytes, int) or not 0 < max_value_bytes <= 1024**2:
        raise InvalidArgumentError(
            "etcd backend: max_value_bytes must be 1 .. 1 MiB (etcd's request limit is 1.5 MiB), "
            f"got {max_value_bytes!r}"
        )
    parsed = Options(
        lease_duration=ttl, renew_deadline=renew_deadline, retry_period=retry_period,
        request_timeout=request_timeout, username=options.get("username"), password=options.get("password"),
        tls=dict(tls) if tls is not None else None, max_value_bytes=max_value_bytes,
    )
    if not parsed.deadline < ttl - CLOCK_MARGIN:
        raise InvalidArgumentError(
            f"etcd backend: renew_deadline ({parsed.deadline} s) must be less than lease_duration - {CLOCK_MARGIN:g} "
            f"({ttl - CLOCK_MARGIN} s): etcd counts lease TTLs in whole seconds from its own apply"
        )
    if not parsed.period * 1.2 < parsed.deadline:
        raise InvalidArgumentError(
            f"etcd backend: retry_period ({parsed.period} s) must be less than renew_deadline / 1.2 "
            f"({parsed.deadline / 1.2:.3f} s)"
        )
    return parsed


def check_hosts(location: str) -> list[tuple[str, int]]:
    """HOST[:PORT][,HOST[:PORT]...] from the URL as (host, port) pairs, or InvalidArgumentError."""
    return validation.check_hosts(location, default_port=DEFAULT_PORT, example="etcd://etcd1:2379,etcd2/app")


def check_prefix(path: str) -> str:
    """The URL's PREFIX as the key root ('' or 'PREFIX/'), or InvalidArgumentError."""
    path = path.strip("/")
    if not path:
        return ""
    if not _PREFIX.match(path):
        raise InvalidArgumentError(
            f"etcd URL prefix {path!r} must be '/'-separated segments of [A-Za-z0-9._-], e.g. etcd://etcd1/app"
        )
    return path + "/"
