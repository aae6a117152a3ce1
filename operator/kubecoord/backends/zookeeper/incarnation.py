"""Which incarnation of a KV store's root znode a write went to (``store_incarnation``).

A store lives under one root znode, /CHROOT/kv/STORE. Deleted behind its clients' backs
(recursively: ZooKeeper deletes only empty znodes), it is re-created by the next put(),
whose makepath makes the root again: a new incarnation, whose keys start again at version
1. The root's czxid (the zxid of the transaction that created it) names the incarnation:
a re-created root gets a new one. The pipeline judges versions per incarnation
(analytics/kv.py), as it does for a kubernetes store's ConfigMap uid.

Cost: nothing per write in the steady state. The root's czxid is cached together with an
exists() watch armed on the root when it was read. ZooKeeper sends a watch's event before
the answer to any request it processes after the change, and kazoo's connection thread
takes a fired watch off its table (Session.watching) before it reads the next answer. So
once a write's answer has arrived, a cached czxid whose watch is still armed is the root
that existed when the write was applied, and the written key lived under it (checked too:
a key is younger than the root it lives in, key czxid > root czxid). Only when that watch
has fired (the root was deleted or re-created) or the session reconnected does the next
write pay one exists() round trip, which reads the root again and re-arms the watch.

Guaranteed: the incarnation logged is the root the write went to, except when the store
is deleted between the write and that exists(): the root the write went to is gone and
cannot be read. The write is then logged with the incarnation this client knew before, if
that one predates the key (right unless the store was re-created *and* deleted again in
between), and without an incarnation if this client knew none. Reading the incarnation
never fails a write that was applied: on a read error the same fallback applies.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from kubecoord.backends.zookeeper.session import Session


class RootIncarnation:
    """The czxid of one store's root znode, as seen by the writes of one handle."""

    def __init__(self, session: Session, root: str) -> None:
        self._session = session
        self._root = root
        self._lock = threading.Lock()
        self._czxid: int | None = None
        self._watch: Callable[[Any], None] | None = None
        """The exists() watch armed when ``_czxid`` was read; one object per read, so that
        its presence in kazoo's table vouches for that read and no other."""
        self._generation = -1

    def of(self, key_czxid: int) -> str | None:
        """The incarnation a write went to, given the written key's czxid; call it once the
        write's answer has arrived."""
        with self._lock:
            czxid, watch, generation = self._czxid, self._watch, self._generation
        if (
            czxid is not None
            and watch is not None
            and czxid < key_czxid
            and generation == self._session.generation
            and self._session.watching(self._root, watch)
        ):
            return str(czxid)
        return self._read_again(key_czxid, czxid)

    def _read_again(self, key_czxid: int, known: int | None) -> str | None:
        def watch(event: Any) -> None:
            """Does nothing: only its place in kazoo's watch table matters."""

        generation = self._session.generation
        try:
            stat = self._session.read(self._session.client.exists_async, self._root, watch=watch)
        except (KazooException, KazooTimeoutError):
            stat = None  # the write was applied: log the best incarnation known, never fail it
        if stat is not None:
            with self._lock:
                self._czxid, self._watch, self._generation = stat.czxid, watch, generation
            if stat.czxid < key_czxid:
                return str(stat.czxid)  # the root exists now and predates the key: the key's root
        return str(known) if known is not None and known < key_czxid else None
