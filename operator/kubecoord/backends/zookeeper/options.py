"""connect() options of zookeeper://, validated before any connection is made.

Unknown options and bad values raise InvalidArgumentError naming the option. The table
is in the package docstring (kubecoord.backends.zookeeper).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.retry import KazooRetry
from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, make_acl

from kubecoord.errors import InvalidArgumentError
from kubecoord.timings import DEFAULT_SESSION_LEASE

JUTE_MAXBUFFER = 0xFFFFF
"""ZooKeeper's default jute.maxbuffer: the largest request packet a server accepts (bytes)."""
REQUEST_HEADROOM = 4096
"""Bytes of a request that are not the value: znode path (keys up to 512 UTF-8 bytes,
up to three times that once escaped), header, ACLs, framing."""

_RETRY_KEYS = {"max_tries", "delay", "backoff", "max_jitter", "max_delay"}
_PERMS = {"r": "read", "w": "write", "c": "create", "d": "delete", "a": "admin"}


@dataclass(frozen=True, slots=True)
class Options:
    session_timeout: float
    connect_timeout: float
    request_timeout: float
    connection_retry: KazooRetry
    read_retry: KazooRetry
    auth: str | None
    acl: list[ACL]
    max_value_bytes: int


def _positive(options: dict[str, Any], name: str, default: float) -> float:
    value = options.pop(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise InvalidArgumentError(f"zookeeper option {name} must be a positive number, got {value!r}")
    return float(value)


def _retry(options: dict[str, Any], name: str, default: Mapping[str, Any]) -> KazooRetry:
    value = options.pop(name, default)
    if not isinstance(value, Mapping) or set(value) - _RETRY_KEYS:
        raise InvalidArgumentError(f"zookeeper option {name} must be a dict with keys among {sorted(_RETRY_KEYS)}")
    try:
        return KazooRetry(**value)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"zookeeper option {name}: {exc}") from None


def parse_acl(entries: object) -> list[ACL]:
    """ACL strings "SCHEME:ID:PERMS" (PERMS from 'rwcda'), e.g. "world:anyone:r", "auth::rwcda"."""
    if isinstance(entries, str) or not isinstance(entries, Sequence) or not entries:
        raise InvalidArgumentError('zookeeper option acl must be a non-empty list of "SCHEME:ID:PERMS" strings')
    acl = []
    for entry in entries:
        if not isinstance(entry, str) or entry.count(":") < 2:
            raise InvalidArgumentError(f'zookeeper ACL entry {entry!r} must be "SCHEME:ID:PERMS"')
        scheme, rest = entry.split(":", 1)
        ident, perms = rest.rsplit(":", 1)
        if not scheme or not perms or set(perms) - set(_PERMS):
            raise InvalidArgumentError(f"zookeeper ACL entry {entry!r}: PERMS must be letters from 'rwcda'")
        acl.append(make_acl(scheme, ident, **{_PERMS[p]: True for p in perms}))
    return acl


def parse(raw: dict[str, Any]) -> Options:
    options = dict(raw)
    session_timeout = _positive(options, "lease_duration", DEFAULT_SESSION_LEASE)  # kazoo's session timeout
    connect_timeout = _positive(options, "connect_timeout", 15.0)
    request_timeout = _positive(options, "request_timeout", session_timeout)
    connection_retry = _retry(options, "connection_retry", {"max_tries": -1, "delay": 0.1, "max_delay": 2.0})
    read_retry = _retry(options, "read_retry", {"max_tries": 3, "delay": 0.05, "max_delay": 1.0})
    auth = options.pop("auth", None)
    if auth is not None and (not isinstance(auth, str) or ":" not in auth):
        raise InvalidArgumentError('zookeeper option auth must be "USER:PASSWORD" (digest scheme)')
    acl_option = options.pop("acl", None)
    if acl_option is not None:
        acl = parse_acl(acl_option)
    elif auth is not None:
        acl = [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE]  # world-readable, writable by the creator
    else:
        acl = list(OPEN_ACL_UNSAFE)
    jute_maxbuffer = int(_positive(options, "jute_maxbuffer", JUTE_MAXBUFFER))
    ceiling = jute_maxbuffer - REQUEST_HEADROOM
    max_value_bytes = int(_positive(options, "max_value_bytes", ceiling))
    if max_value_bytes > ceiling:
        raise InvalidArgumentError(
            f"zookeeper option max_value_bytes={max_value_bytes} exceeds what a jute.maxbuffer of "
            f"{jute_maxbuffer} admits ({ceiling}); raise jute_maxbuffer to match the server's"
        )
    sessionless = sorted(set(options) & {"renew_deadline", "retry_period"})
    if sessionless:
        raise InvalidArgumentError(
            f"zookeeper backend: {sessionless} are not options of a ZooKeeper session; its one timing is lease_duration"
        )
    if options:
        raise InvalidArgumentError(f"zookeeper backend: unknown options {sorted(options)}")
    return Options(
        session_timeout=session_timeout,
        connect_timeout=connect_timeout,
        request_timeout=request_timeout,
        connection_retry=connection_retry,
        read_retry=read_retry,
        auth=auth,
        acl=acl,
        max_value_bytes=max_value_bytes,
    )
