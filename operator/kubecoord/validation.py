"""Input rules shared by every backend, checked before any request is made.

One set of rules for all backends means that a program that works on memory:// works
unchanged on kubernetes:// and zookeeper://. Backends encode what the rules admit to
their own naming constraints (ConfigMap keys, znode names); they never narrow them,
except for value sizes, which each backend states as ``max_value_bytes``.

Rules:

- names (election service, group, store): DNS-1123 labels — lowercase letters, digits
  and '-', starting and ending alphanumeric, at most 63 characters — because they name
  Kubernetes objects and custom resources.
- ids (candidates, members): 1 to 128 characters, no '/', no control characters.
- keys: '/'-separated paths of 1 to 512 UTF-8 bytes; no leading or trailing '/', no
  empty, '.' or '..' segment, no control characters (NUL included).
- namespaces (for key-set listeners): '' (the store's root) or a valid key.
- values and data: any str that encodes to UTF-8 (no lone surrogates); empty allowed.
"""

from __future__ import annotations

import math
import re
import unicodedata

from kubecoord.errors import InvalidArgumentError, ValueTooLargeError

MAX_NAME_CHARS = 63
MAX_ID_CHARS = 128
MAX_KEY_BYTES = 512
MAX_DATA_BYTES = 64 * 1024

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _has_control_char(text: str) -> bool:
    return any(unicodedata.category(ch) == "Cc" for ch in text)


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(f"{what} is not valid Unicode text: {exc.reason}") from None


def check_name(name: object, what: str = "name") -> str:
    """Return ``name`` if it is a DNS-1123 label, else raise InvalidArgumentError."""
    if not isinstance(name, str):
        raise InvalidArgumentError(f"{what} must be a str, got {type(name).__name__}")
    if len(name) > MAX_NAME_CHARS or not _DNS_LABEL.match(name):
        raise InvalidArgumentError(
            f"{what} {name!r} must be a DNS-1123 label: lowercase letters, digits and '-', "
            f"starting and ending alphanumeric, at most {MAX_NAME_CHARS} characters"
        )
    return name


def check_id(ident: object, what: str = "id") -> str:
    """Return a candidate or member id if valid, else raise InvalidArgumentError."""
    if not isinstance(ident, str):
        raise InvalidArgumentError(f"{what} must be a str, got {type(ident).__name__}")
    if not ident or len(ident) > MAX_ID_CHARS:
        raise InvalidArgumentError(f"{what} must have 1 to {MAX_ID_CHARS} characters, got {len(ident)}")
    if "/" in ident or _has_control_char(ident):
        raise InvalidArgumentError(f"{what} {ident!r} must not contain '/' or control characters")
    _utf8(ident, what)
    return ident


def check_key(key: object, what: str = "key") -> str:
    """Return ``key`` if it is a valid '/'-separated path, else raise InvalidArgumentError."""
    if not isinstance(key, str):
        raise InvalidArgumentError(f"{what} must be a str, got {type(key).__name__}")
    if not key:
        raise InvalidArgumentError(f"{what} must not be empty")
    size = len(_utf8(key, what))
    if size > MAX_KEY_BYTES:
        raise InvalidArgumentError(f"{what} is {size} bytes in UTF-8; at most {MAX_KEY_BYTES} allowed")
    if _has_control_char(key):
        raise InvalidArgumentError(f"{what} {key!r} must not contain control characters")
    for segment in key.split("/"):
        if segment in ("", ".", ".."):
            raise InvalidArgumentError(
                f"{what} {key!r} must be a relative path without empty, '.' or '..' segments"
            )
    return key


def check_namespace(namespace: object) -> str:
    """A namespace is '' (the store's root) or a valid key."""
    if namespace == "":
        return ""
    return check_key(namespace, "namespace")


def check_value(value: object, *, max_bytes: int, what: str = "value") -> str:
    """Return ``value`` if it is UTF-8 text of at most ``max_bytes`` bytes."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a str, got {type(value).__name__}")
    size = len(_utf8(value, what))
    if size > max_bytes:
        raise ValueTooLargeError(f"{what} is {size} bytes in UTF-8; this backend stores at most {max_bytes}")
    return value


def check_data(data: object, what: str = "data") -> str:
    """Candidate and member data: UTF-8 text of at most MAX_DATA_BYTES."""
    return check_value(data, max_bytes=MAX_DATA_BYTES, what=what)


def check_version(version: object) -> int | None:
    """An expected_version is None or a positive int."""
    return _optional_int(version, minimum=1, what="expected_version")


def check_epoch(epoch: object) -> int | None:
    """A fencing epoch is None or an int >= 0 (a Lease's first holder has 0 transitions)."""
    return _optional_int(epoch, minimum=0, what="fencing_epoch")


def check_fence(name: object, token: object) -> None:
    """A fence (kubecoord.api.Fence) names a lock or election (a DNS-1123 label) and
    carries its token, an int >= 0."""
    check_name(name, "fence name")
    if isinstance(token, bool) or not isinstance(token, int) or token < 0:
        raise InvalidArgumentError(f"fence token must be an int >= 0, got {token!r}")


def _optional_int(value: object, *, minimum: int, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgumentError(f"{what} must be None or an int >= {minimum}, got {value!r}")
    return value


def check_seconds(value: object, what: str, *, zero: bool = False) -> float:
    """A positive (or, with ``zero``, non-negative), finite number of seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0 \
            or (value == 0 and not zero):
        kind = "a non-negative" if zero else "a positive"
        raise InvalidArgumentError(f"{what} must be {kind} number of seconds, got {value!r}")
    return float(value)


def check_ttl(value: object, what: str) -> int:
    """A lease or row TTL: a whole number of seconds >= 2 (the servers count TTLs in whole
    seconds, and a holder must stop believing at least one second before the TTL ends)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value != int(value) or value < 2:
        raise InvalidArgumentError(f"{what} must be a whole number of seconds >= 2 (a TTL), got {value!r}")
    return int(value)


# -- a backend URL's hosts and connect()'s options (the backends that take them) --

_HOST = re.compile(r"^(\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9._-]+))(:(?P<port>\d{1,5}))?$")


def check_hosts(location: str, *, default_port: int, example: str) -> list[tuple[str, int]]:
    """A URL's HOST[:PORT][,HOST[:PORT]...] as (host, port) pairs, PORT ``default_port``
    where absent (an IPv6 HOST in brackets); InvalidArgumentError naming the form and
    ``example`` (a URL of the scheme, which also names it)."""
    hosts = []
    scheme = example.partition("://")[0]
    for part in location.split(","):
        match = _HOST.match(part) if part else None
        port = int(match.group("port")) if match and match.group("port") else default_port
        if match is None or not 0 < port < 65536:
            raise InvalidArgumentError(
                f"{scheme} URL hosts {location!r} must be HOST[:PORT][,HOST[:PORT]...], e.g. {example}"
            )
        hosts.append((match.group("v6") or match.group("name"), port))
    return hosts


def check_option_names(options: dict[str, object], known: set[str], backend: str) -> None:
    """InvalidArgumentError naming the options a backend does not know."""
    unknown = sorted(set(options) - known)
    if unknown:
        raise InvalidArgumentError(f"{backend} backend: unknown options {unknown}; known: {sorted(known)}")


def check_credentials(options: dict[str, object], backend: str) -> None:
    """``username`` and ``password``: both str or both absent (None)."""
    for name in ("username", "password"):
        if options.get(name) is not None and not isinstance(options[name], str):
            raise InvalidArgumentError(f"{backend} backend: {name} must be a str")
    if (options.get("username") is None) != (options.get("password") is None):
        raise InvalidArgumentError(f"{backend} backend: username and password go together")


def parent_of(key: str) -> str:
    """The namespace a key lives in: 'a/b/c' -> 'a/b', 'a' -> ''."""
    head, _, _ = key.rpartition("/")
    return head


def child_name(namespace: str, key: str) -> str | None:
    """The direct child of ``namespace`` on the path to ``key``, or None if not below it."""
    if namespace == "":
        rest = key
    elif key.startswith(namespace + "/"):
        rest = key[len(namespace) + 1 :]
    else:
        return None
    return rest.split("/", 1)[0]
