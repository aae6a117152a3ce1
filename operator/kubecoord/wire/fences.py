"""Fenced writes: the rule a store applies to a write that carries a fencing token, and
the stored form of the high-water marks it keeps (Kleppmann's fencing tokens; etcd's
lock-key revision compared in the write's transaction).

A fencing *domain* is the name of a lock or election (a DNS-1123 label); its tokens are
the lock's token or the election's epoch, which strictly increase across holders. A store
keeps, next to the data it guards, the highest token it accepted per domain (its *marks*).
A write carrying ``(domain, token)``:

- is refused (FencedError, nothing written) when the marks hold a higher token for the
  domain: a newer holder already wrote;
- is accepted when ``token`` equals the mark (the same holder writing again) or exceeds
  it (a new holder); the mark becomes ``max(mark, token)`` in the same compare-and-set as
  the data, so the check and the write are one step for every process.

Stored form, one JSON object per store object (the kubernetes shard's annotation
``kubecoord.dev/kv-fences``, the ZooKeeper store's root znode data)::

    {"format": 1, "tokens": {"DOMAIN": TOKEN, ...}}

A reader that finds a ``format`` it does not know refuses fenced writes to that object
(UnsupportedFeatureError) rather than overwrite marks it cannot read; data it did not
write (no object, an empty body) counts as no marks. Cassandra keeps the same marks in a
``map<text, bigint>`` static column of the store's partition (schema version 2).

Pure functions over JSON; stdlib only.
"""

from __future__ import annotations

import json

from kubecoord.errors import CoordinationError, FencedError, UnsupportedFeatureError
from kubecoord.wire import json_text, object_names

FORMAT = 1
"""The stored form's version; bumped by any change a reader of this one would misread."""
ANNOTATION = object_names.KV_FENCES_ANNOTATION
"""The kubernetes shard's annotation that holds its marks."""

Marks = dict[str, int]


def admit(marks: Marks, domain: str, token: int, *, where: str) -> Marks | None:
    """The marks after accepting ``token`` for ``domain``, or None when they need no change
    (``token`` equals the mark). Raises FencedError when the marks hold a higher token;
    ``where`` names the store (and object) for the message."""
    accepted = marks.get(domain)
    if accepted is not None and accepted > token:
        raise FencedError(
            f"{where}: write fenced by {domain!r}: token {token} is below {accepted}, which this store "
            "already accepted (a newer holder wrote; nothing was written)",
            name=domain, token=token, accepted=accepted,
        )
    if accepted == token:
        return None
    return {**marks, domain: token}


def encode(marks: Marks) -> str:
    return json.dumps({"format": FORMAT, "tokens": dict(sorted(marks.items()))}, separators=(",", ":"))


def decode(text: str | bytes | None, *, where: str) -> Marks:
    """The marks stored as ``text``; {} for none. Raises UnsupportedFeatureError for a format
    this client does not know and CoordinationError for a body that is not the stored form."""
    if text is None or text in ("", b""):
        return {}
    try:
        parsed = json_text.loads(text)
    except ValueError:
        raise CoordinationError(f"{where}: the fencing marks are not JSON: {text!r:.200}") from None
    if not isinstance(parsed, dict):
        raise CoordinationError(f"{where}: the fencing marks are not a JSON object: {text!r:.200}")
    version = parsed.get("format")
    if version != FORMAT:
        raise UnsupportedFeatureError(
            "kubecoord", f"{where}: fencing marks of format {version!r} (this client knows {FORMAT})"
        )
    tokens = parsed.get("tokens")
    if not isinstance(tokens, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in tokens.items()
    ):
        raise CoordinationError(f"{where}: the fencing marks' tokens are malformed: {text!r:.200}")
    return dict(tokens)
