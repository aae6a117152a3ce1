"""What every zookeeper handle (election, group, store, registry) shares: its coordinator's
context (context.py), a retry for background work, deletion of its nodes on close."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import ClassVar

from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from kubecoord._core.handles import Handle
from kubecoord.backends.zookeeper.context import ZooKeeperContext

log = logging.getLogger("kubecoord.zookeeper")

RETRY_DELAY = 0.5
"""Seconds before background work that failed while connected is tried again."""


class ZooKeeperHandle(Handle):
    """The core's handle scaffolding plus the session, dispatcher and chroot of a coordinator."""

    folder: ClassVar[str]
    """The znode folder of this kind of handle under the chroot (elections, groups, kv)."""

    def __init__(self, context: ZooKeeperContext, name: str) -> None:
        super().__init__(context, name, context.events)
        self._session = context.session
        self._dispatcher = context.dispatcher
        self.path = f"{context.chroot}/{self.folder}/{name}"
        """The handle's znode: CHROOT/FOLDER/NAME."""
        self._lock = threading.RLock()
        """Guards the handle's own state; reentrant."""

    def _close_session_bound(self, on_state: Callable[[str], None], release: Callable[[], None]) -> None:
        """close() of a handle that hears of the session's states (``on_state``) and holds
        nodes (an election's candidates, a group's members): stop hearing, then, under the
        handle's lock, mark it closed and ``release`` what it holds; then the core's close."""
        if self._closed:
            return
        self._session.unsubscribe(on_state)
        with self._lock:
            self._closed = True
            release()
        Handle.close(self)

    def _retry_later(self, task_key: object, task: object) -> None:
        """Post ``task`` again after RETRY_DELAY if the session is still connected."""

        def repost() -> None:
            if not self._closed and self._session.connected:
                self._session.post(task_key, task)  # type: ignore[arg-type]

        timer = threading.Timer(RETRY_DELAY, repost)
        timer.daemon = True
        timer.start()

    def _delete_on_close(self, path: str, *, unique: bool = False) -> None:
        """Delete an ephemeral node this handle owns (close, resign); never fails. If ZooKeeper
        cannot be reached or does not answer, a ``unique`` node (a sequential one: nobody
        re-creates that path) is deleted on the session's next CONNECTED — the session may survive the disconnection,
        and a closed candidate's node kept the election from anyone else for the rest of it;
        other nodes go with the session (a member's node may be re-created at its path by a
        new join, which a late deletion would remove)."""
        owner = self._session.last_session_id
        try:
            self._session.call(self._session.client.delete_async, path)
        except NoNodeError:
            pass
        except (KazooException, KazooTimeoutError):
            if unique and owner is not None:
                log.warning("could not delete a node on close; deleting it on reconnection", extra={"path": path})
                self._session.delete_when_connected(path, owner)
            else:
                log.warning("could not delete a node on close; it goes with the session", extra={"path": path})
