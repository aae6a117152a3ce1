"""The data of a KV znode: a header that marks it as a key and maps its version.

    b"K" + BASE (ASCII decimal) + b"\n" + value (UTF-8)

A znode without the header (kazoo's makepath writes b"") is an implicit parent: it
exists only because keys live below it, and fetch() does not see it. BASE maps
ZooKeeper's dataVersion to the interface's per-key version: version = dataVersion -
BASE + 1. A put() that creates the znode writes BASE 0 (dataVersion 0 -> version 1); a
put() that turns an implicit parent at dataVersion d into a key writes BASE d + 1 with
a compare-and-set on d, so that key also starts at version 1.
"""

from __future__ import annotations

from kazoo.protocol.states import ZnodeStat

from kubecoord.api import Versioned

MARKER = b"K"


def encode(base: int, value: str) -> bytes:
    return MARKER + str(base).encode("ascii") + b"\n" + value.encode("utf-8")


def is_key(raw: bytes) -> bool:
    return raw.startswith(MARKER) and b"\n" in raw


def base_of(raw: bytes) -> int:
    return int(raw[1 : raw.index(b"\n")])


def decode(raw: bytes, stat: ZnodeStat) -> Versioned | None:
    """The key's value and interface version, or None for an implicit parent."""
    if not is_key(raw):
        return None
    header_end = raw.index(b"\n")
    base = int(raw[1:header_end])
    return Versioned(raw[header_end + 1 :].decode("utf-8"), stat.version - base + 1)


def value_of(node: tuple[bytes, ZnodeStat] | None) -> str | None:
    if node is None:
        return None
    versioned = decode(*node)
    return versioned.value if versioned else None
