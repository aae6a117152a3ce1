"""One kazoo client (one ZooKeeper session) per coordinator, and how its state is shared.

Guarantees:

- Every request waits at most ``request_timeout``; reads are retried (read_retry) on
  ConnectionLoss, writes are not (their outcome would be ambiguous). While the session
  is not connected (SUSPENDED, reconnecting) requests fail at once with
  BackendUnavailableError instead of waiting for the reconnection.
- ``connected`` flips to False in kazoo's own state callback, before any task runs, so a
  leader stops believing it leads the moment kazoo reports SUSPENDED.
- Handles subscribe with ``subscribe(fn)``; ``fn(state)`` runs on the worker thread for
  every SUSPENDED, LOST and CONNECTED, in kazoo's order. After LOST kazoo opens a new
  session by itself; its CONNECTED is where handles re-create what the old one held.

- ``alive_until`` (monotonic seconds): until when the session is certainly alive at the
  server — the send time of the latest request or ping the server answered, plus the
  session timeout the server negotiated (it expires a session only after that long
  without hearing from it). The server bounds the requested timeout by its
  min/maxSessionTimeout; ``session_timeout`` is what it granted, read from its answer to
  each connect before anything else of that connection is read, and a warning is logged
  whenever it differs from the requested one. Each connect resets it to the connect's
  send time plus the timeout granted on it: ZooKeeper re-arms a session's expiry with
  the reconnecting connection's timeout, so a reconnect granted less (a server restarted
  or reached with a lower maxSessionTimeout) moves the expiry earlier than the previous
  connection's answers proved. A leader leads only before it (zookeeper/election.py), so a process paused
  (SIGSTOP, a VM freeze) longer than the session stops believing it leads the moment it
  runs again, before kazoo has noticed anything, and its ``lost`` event says when its
  leadership ended.

Not guaranteed: kazoo drops its watch registrations on SUSPENDED (it fires them once
with a NONE event); handles re-arm their watches on the next CONNECTED. ``alive_until``
reaches into kazoo's connection (its _submit, _read_header and _invoke): kazoo exposes
neither a timestamp of the server's last answer nor the negotiated session timeout (it
keeps only the requested one, in ``KazooClient._session_timeout``).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionDropped,
    ConnectionLoss,
    KazooException,
    NoNodeError,
    OperationTimeoutError,
    RequestTimeoutError,
    SessionExpiredError,
    SessionMovedError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.serialization import Connect
from kazoo.protocol.states import KazooState
from kazoo.retry import KazooRetry

from kubecoord._internal.subscribers import Subscribers
from kubecoord.backends.zookeeper.errors import translating
from kubecoord.backends.zookeeper.options import Options
from kubecoord.backends.zookeeper.worker import Worker
from kubecoord.errors import OutcomeUnknownError

log = logging.getLogger("kubecoord.zookeeper")

SUSPENDED = "SUSPENDED"
LOST = "LOST"
CONNECTED = "CONNECTED"

StateListener = Callable[[str], None]
_GENERATIONS_KEPT = 256
_SENT_UNANSWERED = (
    ConnectionLoss, ConnectionDropped, SessionExpiredError, SessionMovedError, OperationTimeoutError,
    RequestTimeoutError, KazooTimeoutError,
)
"""What a request that was handed to kazoo may end in without ZooKeeper's answer."""


class Session:
    def __init__(self, hosts: str, options: Options, name: str) -> None:
        self.options = options
        self.client = KazooClient(
            hosts=hosts,
            timeout=options.session_timeout,
            connection_retry=options.connection_retry,
            command_retry=options.read_retry,
            auth_data=[("digest", options.auth)] if options.auth else None,
            default_acl=options.acl,
            logger=logging.getLogger("kubecoord.zookeeper.kazoo"),
        )
        self._worker = Worker(name)
        self._lock = threading.Lock()
        self._subscribers: Subscribers[str] = Subscribers(log, "zookeeper session-state handler failed")
        self._orphans: dict[str, int] = {}
        """Ephemeral nodes of closed handles that could not be deleted: path -> owning session id."""
        self._orphan_prefixes: dict[tuple[str, str], int] = {}
        """Ephemeral sequential nodes whose create may have landed unanswered, known only by
        their unique prefix: (parent path, name prefix) -> owning session id."""
        self._last_session_id: int | None = None
        self._crashed = False
        self.generation = 0
        """Bumped on every SUSPENDED and LOST: leadership confirmed in an older one is unconfirmed."""
        self._ended: dict[int, float] = {}
        """generation -> alive_until when it ended: how long that connection's answers proved
        the session alive (answers on the next connection, or a new session, prove nothing
        about a leadership confirmed before)."""
        self.alive_until = 0.0
        self._negotiated: float | None = None
        """The session timeout (s) the server granted in its answer to the latest connect."""
        # xid -> monotonic send times of the requests not answered yet, oldest first, on
        # kazoo's connection thread. A queue, not one time: every ping has the same xid.
        self._sent: dict[int, collections.deque[float]] = {}
        self._time_answers()
        self.client.add_listener(self._on_state)

    def _time_answers(self) -> None:
        """Note each request's send time and, when the server answers it, extend alive_until
        (both run on kazoo's connection thread: requests and answers are in order).

        Pings all carry xid -2, and two can be out at once: kazoo sends one whenever its
        deadline has passed, e.g. first thing on resuming from SIGSTOP, before it reads the
        answer to the one sent before the pause. An answer proves the session alive from
        the oldest outstanding send of its xid (the server answers in order), never from a
        later one (that made a paused leader believe it led past its expired session)."""
        connection = self.client._connection
        submit, read_header, invoke = connection._submit, connection._read_header, connection._invoke

        def timed_submit(request: Any, timeout: float, xid: int | None = None) -> Any:
            if xid is not None:
                self._sent.setdefault(xid, collections.deque()).append(time.monotonic())
            return submit(request, timeout, xid)

        def timed_read_header(timeout: float) -> Any:
            header, buffer, offset = read_header(timeout)
            outstanding = self._sent.get(header.xid)
            if outstanding:
                sent = outstanding.popleft()
                if not outstanding:
                    del self._sent[header.xid]
                self.alive_until = max(self.alive_until, sent + self.session_timeout)
            return header, buffer, offset

        def negotiating_invoke(timeout: float, request: Any, xid: int | None = None) -> Any:
            # kazoo's handshake writer: the Connect answer carries the granted timeout (ms).
            sent = time.monotonic()
            result = invoke(timeout, request, xid)
            if isinstance(request, Connect) and isinstance(result, tuple) and result[0].time_out > 0:
                granted = result[0].time_out / 1000.0
                self._negotiated_as(granted)
                # The server re-armed the session's expiry with the granted timeout when it
                # took this connect: it replaces whatever the previous connection proved
                # (a shorter grant moves the expiry earlier), so this is not a max().
                self.alive_until = sent + granted
            return result

        connection._submit = timed_submit
        connection._read_header = timed_read_header
        connection._invoke = negotiating_invoke

    def _negotiated_as(self, granted: float) -> None:
        """The server's answer to a connect granted ``granted`` seconds (kazoo's connection
        thread, before CONNECTED and before any other answer of the connection is read)."""
        previous, self._negotiated = self._negotiated, granted
        if granted != self.options.session_timeout and granted != previous:
            log.warning(
                "the ZooKeeper server negotiated a session timeout of %s s instead of the requested %s s"
                " (its min/maxSessionTimeout); leadership and locks end by the negotiated one",
                granted, self.options.session_timeout,
                extra={"requested": self.options.session_timeout, "negotiated": granted},
            )

    # -- lifecycle ----------------------------------------------------------------
    def start(self) -> None:
        try:
            with translating():
                self.client.start(timeout=self.options.connect_timeout)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._worker.close()
        try:
            self.client.stop()  # closes the session: ephemerals go at once
        finally:
            self.client.close()

    def crash(self) -> None:
        """Test hook: go silent as a process killed with -9 would.

        The socket is shut down without a CloseSession request, so the server keeps the
        session, and its ephemeral znodes, until the session timeout. No further task,
        callback or reconnection happens. Reaches into kazoo internals (_stopped,
        _connection._socket): kazoo has no public way to drop a session uncleanly.
        """
        with self._lock:
            self._crashed = True
        self._subscribers.clear()
        self._worker.close(timeout=0)
        self.client._stopped.set()  # keeps kazoo's connection loop from reconnecting
        sock = getattr(self.client._connection, "_socket", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.client._connection.connection_stopped.wait(self.options.session_timeout)
        self.client.close()

    # -- state --------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        # kazoo's own flag: cleared before it tells listeners of SUSPENDED, set before CONNECTED.
        return bool(self.client.connected) and not self._crashed

    @property
    def session_timeout(self) -> float:
        """The session timeout (s) the server negotiated on the latest connect (within its
        min/maxSessionTimeout); the requested one until a server has answered."""
        negotiated = self._negotiated
        return self.options.session_timeout if negotiated is None else negotiated

    @property
    def session_id(self) -> int | None:
        return self.client.client_id[0] if self.client.client_id else None

    @property
    def last_session_id(self) -> int | None:
        """The session id as of the latest CONNECTED, kept while disconnected (the session
        may survive the disconnection; session_id is None meanwhile)."""
        return self._last_session_id

    def alive_until_in(self, generation: int) -> float:
        """alive_until as far as ``generation``'s answers prove it: the current one's now, an
        ended one's as it stood when it ended (monotonic seconds)."""
        if generation == self.generation:
            return self.alive_until
        return self._ended.get(generation, self.alive_until)

    def subscribe(self, listener: StateListener) -> None:
        self._subscribers.add(listener)

    def unsubscribe(self, listener: StateListener) -> None:
        self._subscribers.discard(listener)

    def post(self, key: Hashable | None, task: Callable[[], None]) -> None:
        self._worker.post(key, task)

    def _on_state(self, state: str) -> None:
        # kazoo's connection thread: record and hand over, never block here.
        if state == KazooState.CONNECTED:
            self._last_session_id = self.session_id
        else:
            self._ended[self.generation] = self.alive_until
            if len(self._ended) > _GENERATIONS_KEPT:
                del self._ended[min(self._ended)]
            self.generation += 1
            self._sent.clear()  # a new connection numbers its requests from the start
        log.debug("zookeeper session state", extra={"state": state})
        self._worker.post(None, lambda: self._fan_out(state))

    def delete_when_connected(self, path: str, owner: int) -> None:
        """Delete the ephemeral node at ``path`` of session ``owner`` on the next CONNECTED
        (on this worker thread), unless the session is gone, and the node with it."""
        with self._lock:
            self._orphans[path] = owner
        if self.connected:  # reconnected meanwhile: no CONNECTED is coming
            self._worker.post(None, self._delete_orphans)

    def delete_prefixed_when_connected(self, parent: str, prefix: str, owner: int) -> None:
        """Delete every ephemeral child of ``parent`` whose name starts with ``prefix`` and that
        session ``owner`` holds, on the next CONNECTED (or now, if connected): a sequential
        create whose answer was lost may have made one, under a name nobody was told."""
        with self._lock:
            self._orphan_prefixes[(parent, prefix)] = owner
        if self.connected:
            self._worker.post(None, self._delete_orphans)

    def _delete_prefixed_orphans(self) -> None:
        with self._lock:
            prefixed = dict(self._orphan_prefixes)
        for (parent, prefix), owner in prefixed.items():
            if self.session_id == owner:
                try:
                    children = self.read(self.client.get_children_async, parent)
                except NoNodeError:
                    children = []
                except (KazooException, KazooTimeoutError):
                    continue  # kept for the next CONNECTED
                paths = [f"{parent}/{child}" for child in children if child.startswith(prefix)]
                if any(self._delete_if_owned(path, owner) is None for path in paths):
                    continue  # kept for the next CONNECTED
            with self._lock:  # deleted, or gone with its session
                if self._orphan_prefixes.get((parent, prefix)) == owner:
                    del self._orphan_prefixes[(parent, prefix)]

    def _delete_if_owned(self, path: str, owner: int) -> bool | None:
        """Delete ``path`` if session ``owner`` holds it: True if deleted, False if it was not
        there or not owner's, None if ZooKeeper could not be asked."""
        try:
            stat = self.read(self.client.exists_async, path)
            if stat is None or stat.ephemeralOwner != owner:
                return False
            self.call(self.client.delete_async, path, version=stat.version)
            return True
        except (NoNodeError, BadVersionError):
            return False
        except (KazooException, KazooTimeoutError):
            return None

    def _delete_orphans(self) -> None:
        self._delete_prefixed_orphans()
        with self._lock:
            orphans = dict(self._orphans)
        for path, owner in orphans.items():
            if self.session_id == owner and self._delete_if_owned(path, owner) is None:
                continue  # kept for the next CONNECTED
            with self._lock:  # deleted, or gone with its session
                if self._orphans.get(path) == owner:
                    del self._orphans[path]

    def _fan_out(self, state: str) -> None:
        if state == CONNECTED:
            try:
                self._delete_orphans()
            except Exception:  # never keep the handles from hearing of the state
                log.exception("deleting closed handles' nodes failed")
        self._subscribers.tell(state)

    # -- requests -----------------------------------------------------------------
    def call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One kazoo *_async request, waited for at most request_timeout.

        Fails at once with ConnectionLoss while not connected: kazoo would queue the
        request until it reconnects, and the worker thread must stay free to hear of
        state changes meanwhile.
        """
        if not self.connected:
            raise ConnectionLoss("not connected to ZooKeeper")
        return method(*args, **kwargs).get(timeout=self.options.request_timeout)

    def write(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One non-idempotent kazoo *_async request (create, set, delete), sent once.

        Not connected: ConnectionLoss before sending (nothing written). Once sent, a lost
        connection, an expired or moved session, or no answer within request_timeout raise
        OutcomeUnknownError: ZooKeeper may have applied it, and sending it again would
        answer NodeExists, BadVersion or NoNode for the caller's own write (or apply an
        unconditional one twice). kazoo itself never re-sends a request after a
        connection loss: its command retry (KazooRetry) runs only where kazoo.retry is
        called, which this package does for reads alone (``read``).
        """
        if not self.connected:
            raise ConnectionLoss("not connected to ZooKeeper")
        try:
            return method(*args, **kwargs).get(timeout=self.options.request_timeout)
        except ConnectionClosedError:
            raise
        except _SENT_UNANSWERED as exc:
            raise OutcomeUnknownError(
                f"ZooKeeper gave no answer to a write it may have applied ({type(exc).__name__}: {exc})"
            ) from None

    def watching(self, path: str, watch: Callable[..., Any]) -> bool:
        """Whether ``watch``, set by an exists() or get() of ``path``, is still armed.

        kazoo's connection thread takes a fired watch off its table (client._data_watchers,
        keyed by the full path) as it reads the event, before it reads the next answer, and
        ZooKeeper sends the event before the answer to any later request: so once an answer
        has arrived, a watch still in the table had not fired when the server sent it.
        Reaches into kazoo's table: kazoo exposes no other view of the watches it holds.
        """
        table = self.client._data_watchers
        return watch in table.get((self.client.chroot or "") + path, ())

    def read(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """An idempotent request, retried on ConnectionLoss within request_timeout."""
        retry: KazooRetry = self.options.read_retry.copy()
        retry.deadline = self.options.request_timeout
        return retry(self.call, method, *args, **kwargs)
