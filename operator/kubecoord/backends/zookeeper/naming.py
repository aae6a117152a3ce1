"""Znode names and paths: the reversible encoding of ids and key segments, and the layout.

Layout under CHROOT (see docs/backends/zookeeper.md)::

    /CHROOT/elections/SERVICE/<uuid>__lock__<seq>   ephemeral sequential, kazoo Lock naming
    /CHROOT/groups/GROUP/<id>                       ephemeral, member data
    /CHROOT/kv/STORE/<seg>/<seg>/...                persistent, header + value

ZooKeeper refuses names with NUL, U+0001-U+001F, U+007F-U+009F, U+D800-U+F8FF and
U+FFF0-U+FFFF (it checks UTF-16 code units, so every character beyond the BMP is refused
too), and the names '.' and '..'. ``encode_name`` percent-encodes the UTF-8 bytes of
exactly those characters, of '%' itself and of '/', and a whole name '.' or '..';
``decode_name`` reverses it. Names that need no escaping are stored as they are, so the
tree stays readable in zkCli.
"""

from __future__ import annotations

import re
import urllib.parse

from kubecoord.errors import InvalidArgumentError

DEFAULT_CHROOT = "kubecoord"
_CHROOT_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")


def _needs_escape(char: str) -> bool:
    code = ord(char)
    return (
        char in "%/"
        or code <= 0x1F
        or 0x7F <= code <= 0x9F
        or 0xD800 <= code <= 0xF8FF
        or code >= 0xFFF0
    )


def encode_name(text: str) -> str:
    """A legal znode name for ``text`` (an id or one key segment), reversibly."""
    if text in (".", ".."):
        return text.replace(".", "%2E")
    return "".join(
        "".join(f"%{byte:02X}" for byte in char.encode("utf-8")) if _needs_escape(char) else char for char in text
    )


def decode_name(name: str) -> str:
    """The id or key segment ``encode_name`` turned into ``name``."""
    return urllib.parse.unquote(name, errors="strict")


def key_path(root: str, key: str) -> str:
    """The znode path of a '/'-separated key (or namespace; '' is ``root`` itself)."""
    if not key:
        return root
    return root + "/" + "/".join(encode_name(segment) for segment in key.split("/"))


def chroot_path(chroot: str) -> str:
    """'/CHROOT' for the URL's path ('' -> the default); InvalidArgumentError if unusable."""
    chroot = chroot.strip("/") or DEFAULT_CHROOT
    segments = chroot.split("/")
    for segment in segments:
        if not _CHROOT_SEGMENT.match(segment) or segment in (".", ".."):
            raise InvalidArgumentError(
                f"ZooKeeper chroot {chroot!r}: each segment must match {_CHROOT_SEGMENT.pattern}"
            )
    if segments[0] == "zookeeper":
        raise InvalidArgumentError("ZooKeeper chroot must not be under /zookeeper (reserved by the server)")
    return "/" + chroot
