"""What every zookeeper handle (election, group, store, registry) shares with its coordinator."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from kubecoord._core.handles import Handle

if TYPE_CHECKING:
    from kubecoord.backends.zookeeper.coordinator import ZooKeeperCoordinator

log = logging.getLogger("kubecoord.zookeeper")

RETRY_DELAY = 0.5
"""Seconds before background work that failed while connected is tried again."""


class ZooKeeperHandle(Handle):
    """The core's handle scaffolding plus the session, dispatcher and chroot of a coordinator."""

    def __init__(self, coordinator: ZooKeeperCoordinator, name: str) -> None:
        super().__init__(coordinator, name, coordinator.events)
        self._coordinator = coordinator
        self._session = coordinator.session
        self._events = coordinator.events
        self._dispatcher = coordinator.dispatcher
        self._root = coordinator.chroot

    def _retry_later(self, task_key: object, task: object) -> None:
        """Post ``task`` again after RETRY_DELAY if the session is still connected."""

        def repost() -> None:
            if not self._closed and self._session.connected:
                self._session.post(task_key, task)  # type: ignore[arg-type]

        timer = threading.Timer(RETRY_DELAY, repost)
        timer.daemon = True
        timer.start()

    def _delete_on_close(self, path: str) -> None:
        """Delete an ephemeral node this handle owns; if ZooKeeper cannot be reached the node
        goes with the session instead, so closing never fails."""
        try:
            self._session.call(self._session.client.delete_async, path)
        except NoNodeError:
            pass
        except (KazooException, KazooTimeoutError):
            log.warning("could not delete a node on close; it goes with the session", extra={"path": path})
