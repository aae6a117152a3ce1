"""KV keys <-> ConfigMap data keys, and the stored form of one entry (a KV store on
Kubernetes: written by the kubernetes backend, read by it and by the command line's
one-shot reader; the shard a key lives in is kv_shards').

ConfigMap data keys must match ``[-._a-zA-Z0-9]+``, be at most 253 characters and not
be '.', '..' or start with '..'. kubecoord keys are '/'-separated paths of up to 512
UTF-8 bytes, so:

- readable encoding (used when it fits in 253 characters): ASCII letters, digits and '-'
  stay, '/' becomes '.', every other byte of the UTF-8 form becomes ``_hh`` (two
  lowercase hex digits; '.' and '_' themselves included). Reversible (decode_key), and
  never '.', '..' or a leading '..' because keys have no empty segments.
- longer keys: ``_h.`` + the SHA-256 of the key. ``_h`` cannot come out of the readable
  encoding ('h' is not a hex digit), so the two never collide; the key itself is kept in
  the entry.

An entry is stored as the JSON object {"k": key, "v": version, "d": value}: key, version
and value change together in one write of the ConfigMap, which is what makes a write
atomic. The store's size is the sum of the data keys' and entries' UTF-8 lengths, which
is what the API server compares with its 1 MiB ConfigMap limit.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from typing import NamedTuple

from kubecoord.wire import json_text

MAX_CONFIGMAP_KEY = 253
CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
HASHED_PREFIX = "_h."
_PLAIN = frozenset((string.ascii_letters + string.digits + "-").encode("ascii"))
_ESCAPE = re.compile(r"_([0-9a-f]{2})")


def encode_key(key: str) -> str:
    """The ConfigMap data key for ``key`` (readable if it fits, else hashed)."""
    parts: list[str] = []
    for byte in key.encode("utf-8"):
        if byte == ord("/"):
            parts.append(".")
        elif byte in _PLAIN:
            parts.append(chr(byte))
        else:
            parts.append(f"_{byte:02x}")
    encoded = "".join(parts)
    if len(encoded) <= MAX_CONFIGMAP_KEY:
        return encoded
    return HASHED_PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()


def decode_key(encoded: str) -> str | None:
    """The key of a readable data key; None for hashed keys (their entry holds the key)."""
    if encoded.startswith(HASHED_PREFIX):
        return None
    raw = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), encoded.replace(".", "/"))
    return raw.encode("latin-1").decode("utf-8")


class Entry(NamedTuple):
    """A key, its value and version (a NamedTuple: this module is on the ``kubecoord``
    command's start-up path, where ``dataclasses`` would import ``inspect``)."""

    key: str
    value: str
    version: int


def dump_entry(entry: Entry) -> str:
    return json.dumps({"k": entry.key, "v": entry.version, "d": entry.value}, ensure_ascii=False, separators=(",", ":"))


def load_entry(data_key: str, text: str) -> Entry | None:
    """Parse one stored entry; None for data that kubecoord did not write."""
    try:
        parsed = json_text.loads(text)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    key, version, value = parsed.get("k"), parsed.get("v"), parsed.get("d")
    if not isinstance(key, str) or not isinstance(value, str) or not isinstance(version, int):
        return None
    if encode_key(key) != data_key:
        return None
    return Entry(key, value, version)


def load_entries(data: dict[str, str] | None) -> dict[str, Entry]:
    """key -> Entry for a ConfigMap's data (foreign data keys are skipped)."""
    entries: dict[str, Entry] = {}
    for data_key, text in (data or {}).items():
        entry = load_entry(data_key, text)
        if entry is not None:
            entries[entry.key] = entry
    return entries


def data_size(data: dict[str, str]) -> int:
    """Bytes the API server counts against the ConfigMap limit."""
    return sum(len(k.encode("utf-8")) + len(v.encode("utf-8")) for k, v in data.items())


def stored_size(key: str, value: str) -> int:
    """Bytes one entry of ``key`` and ``value`` takes in a ConfigMap's data, at the widest
    version: JSON escapes control characters six bytes each, so a value's UTF-8 size can
    understate what it costs severalfold."""
    return data_size({encode_key(key): dump_entry(Entry(key, value, 2**63 - 1))})
