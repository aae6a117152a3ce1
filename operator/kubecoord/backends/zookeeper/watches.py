"""Level-triggered views of one znode's data or children, delivered only when they change.

A Watch reads its znode with a one-shot ZooKeeper watch set; when the watch fires, or
the session reconnects, it reads again on the worker thread and delivers the new state
if it differs from the last one delivered. Rapid changes may coalesce into one delivery,
but the last delivery is always the latest state read (level-triggered, as the interface
promises). The state at start() is the baseline and is not delivered.

Why not kazoo's ChildrenWatch: it stops for good when its znode does not exist, and a
key-set listener may watch a namespace before any key below it is written. A missing
znode is watched with exists() until it appears.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import WatchedEvent, ZnodeStat

from kubecoord.backends.zookeeper.errors import translating
from kubecoord.backends.zookeeper.session import CONNECTED, Session

log = logging.getLogger("kubecoord.zookeeper")

T = TypeVar("T")
WatchFn = Callable[[WatchedEvent | None], None]
_UNSET: Any = object()
RETRY_DELAY = 0.5
"""Seconds before a re-read that failed while connected is tried again."""


def _read_or_watch_creation(session: Session, method: Callable[..., Any], path: str, watch: WatchFn | None,
                            missing: Any) -> Any:
    """``method(path)``, or ``missing`` if the znode does not exist — with ``watch``, armed
    on the znode either way (exists() catches its creation)."""
    while True:
        try:
            return session.read(method, path, watch=watch)
        except NoNodeError:
            if watch is None or session.read(session.client.exists_async, path, watch=watch) is None:
                return missing


def read_data(session: Session, path: str, watch: WatchFn | None = None) -> tuple[bytes, ZnodeStat] | None:
    """The znode's data and stat, or None."""
    return _read_or_watch_creation(session, session.client.get_async, path, watch, None)  # type: ignore[no-any-return]


def read_children(session: Session, path: str, watch: WatchFn | None = None) -> list[str]:
    """The znode's child names ([] if it does not exist)."""
    return _read_or_watch_creation(session, session.client.get_children_async, path, watch, [])  # type: ignore[no-any-return]


class Watch(Generic[T]):
    def __init__(self, session: Session, read: Callable[[WatchFn], T], deliver: Callable[[T], None]) -> None:
        self._session = session
        self._read = read
        self._deliver = deliver
        self._lock = threading.Lock()
        self._last: T = _UNSET
        self._stopped = False

    def start(self) -> T:
        """Read the baseline (raises kubecoord errors) and follow changes from there."""
        with self._lock, translating():
            self._last = self._read(self._on_event)
        self._session.subscribe(self._on_state)
        return self._last

    def stop(self) -> None:
        self._stopped = True
        self._session.unsubscribe(self._on_state)

    def _on_event(self, event: WatchedEvent | None) -> None:
        if not self._stopped:
            self._session.post(self, self.refresh)

    def _on_state(self, state: str) -> None:
        if state == CONNECTED:
            self.refresh()

    def refresh(self) -> None:
        if self._stopped or not self._session.connected:
            return  # the next CONNECTED re-reads
        with self._lock:
            try:
                state = self._read(self._on_event)
            except (KazooException, KazooTimeoutError) as exc:
                log.debug("watch re-read failed; retrying", extra={"error": repr(exc)})
                retry = threading.Timer(RETRY_DELAY, self._on_event, args=(None,))
                retry.daemon = True
                retry.start()
                return
            if state == self._last or self._stopped:
                return
            self._last = state
        self._deliver(state)
