"""``ApiEmulator``: the emulated API server on its own thread and event loop.

    from kubecoord_testkit.emulator import ApiEmulator

    with ApiEmulator() as api:                      # port 0: a free port
        path = api.write_kubeconfig(tmp_path / "kubeconfig")
        client = kubernetes.config.new_client_from_config(config_file=str(path))
        ...
        api.objects("leases", "default")           # what is stored, as dicts

Many clients, in this process or others, may connect at once (aiohttp; each watch is one
long-lived streaming response). Test controls: ``compact()`` (old resourceVersions
answer 410), ``break_watches()`` (the server closes every open watch), ``hang(True)``
(new requests are held unanswered, then dropped on ``hang(False)``), ``requests`` (every
answered request, for counting API calls; the most recent 200,000 are kept).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import pathlib
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from types import TracebackType
from typing import Any, TypeVar

import yaml
from aiohttp import web

from kubecoord_testkit.emulator import auth
from kubecoord_testkit.emulator.collecting import collect
from kubecoord_testkit.emulator.faults import Fault, Faults
from kubecoord_testkit.emulator.registry import Registry
from kubecoord_testkit.emulator.requestinfo import RecordedRequest
from kubecoord_testkit.emulator.routing import Router
from kubecoord_testkit.emulator.store import Store

T = TypeVar("T")
JSON = dict[str, Any]
_log = logging.getLogger(__name__)


class ApiEmulator:
    """An in-process Kubernetes API server for tests (see the package docstring)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        history_limit: int = 100_000,
        bookmark_interval: float = 60.0,
        gc_interval: float = 1.0,
        anonymous_admin: bool = False,
        requests_limit: int = 200_000,
    ) -> None:
        self.host = host
        self._port = port
        self._history_limit = history_limit
        self._bookmark_interval = bookmark_interval
        self._gc_interval = gc_interval
        self._tokens = auth.Tokens(anonymous_admin=anonymous_admin)
        # The most recent requests only: a session-long emulator must not grow without bound.
        self._requests: deque[RecordedRequest] = deque(maxlen=requests_limit)
        self._requests_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._stopping: asyncio.Event | None = None
        self._released: asyncio.Event | None = None  # set while not hanging
        self._held = 0  # requests waiting for hang(False)
        self._registry: Registry | None = None
        self._gc_pending = False
        self._faults = Faults()

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> ApiEmulator:
        if self._thread is not None:
            raise RuntimeError("the emulator is already started")
        self._ready.clear()  # a restart waits for its own readiness, not the first start's
        self._startup_error = None
        self._thread = threading.Thread(target=self._run, name="kubecoord-api-emulator", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            self._thread.join()
            self._thread = None
            raise self._startup_error
        _log.info("API emulator listening", extra={"url": self.url})
        return self

    def stop(self) -> None:
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        if self._stopping is not None:
            loop.call_soon_threadsafe(self._stopping.set)
        thread.join()
        self._thread = None

    def __enter__(self) -> ApiEmulator:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as error:  # reported to start() if it happened before readiness
            if not self._ready.is_set():
                self._startup_error = error
            else:
                _log.exception("API emulator crashed")
        finally:
            self._ready.set()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        self._released = asyncio.Event()
        self._released.set()
        # stop() then start() is a restart: the objects survive (as etcd keeps them when
        # a kube-apiserver restarts); open watches and connections do not.
        if self._registry is None:
            self._registry = Registry(Store(history_limit=self._history_limit), on_change=self._schedule_gc)
        store = self._registry.store
        router = Router(
            self._registry,
            self._tokens,
            record=self._record,
            hung=self._wait_if_hung,
            server_address=lambda: f"{self.host}:{self._port}",
            bookmark_interval=self._bookmark_interval,
            faults=self._faults,
        )
        # The API server accepts request bodies up to 3 MiB (a 1 MiB ConfigMap fits, JSON-encoded).
        app = web.Application(client_max_size=3 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", router.handle)
        runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self._port, backlog=512)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        self._port = sockets[0].getsockname()[1]
        periodic = asyncio.create_task(self._gc_loop())
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            periodic.cancel()
            self._released.set()
            for watcher in store.watchers():
                watcher.close()
            await runner.cleanup()

    # -- garbage collection ------------------------------------------------------------

    def _schedule_gc(self) -> None:
        if not self._gc_pending and self._loop is not None:
            self._gc_pending = True
            self._loop.call_later(0.02, self._gc_pass)

    def _gc_pass(self) -> None:
        self._gc_pending = False
        if self._registry is not None and collect(self._registry):
            self._schedule_gc()

    async def _gc_loop(self) -> None:
        while True:
            await asyncio.sleep(self._gc_interval)
            self._gc_pass()

    # -- running things on the loop ----------------------------------------------------

    def _call(self, fn: Callable[[], T]) -> T:
        loop = self._loop
        if loop is None or self._thread is None:
            raise RuntimeError("the emulator is not running")
        future: Future[T] = Future()

        def run() -> None:
            try:
                future.set_result(fn())
            except BaseException as error:
                future.set_exception(error)

        loop.call_soon_threadsafe(run)
        return future.result()

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            raise RuntimeError("the emulator is not running")
        return self._registry

    # -- public surface ----------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._port}"

    @property
    def port(self) -> int:
        return self._port

    @property
    def admin_token(self) -> str:
        return self._tokens.admin_token

    def token_for_service_account(self, namespace: str, name: str) -> str:
        return self._tokens.for_service_account(namespace, name)

    def write_kubeconfig(
        self, path: str | pathlib.Path, *, namespace: str = "default", token: str | None = None
    ) -> pathlib.Path:
        """A kubeconfig whose current context points at this emulator (admin when no token)."""
        target = pathlib.Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kubecoord-emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "kubecoord-emulator-user", "user": {"token": token or self.admin_token}}],
            "contexts": [
                {
                    "name": "kubecoord-emulator",
                    "context": {
                        "cluster": "kubecoord-emulator",
                        "user": "kubecoord-emulator-user",
                        "namespace": namespace,
                    },
                }
            ],
            "current-context": "kubecoord-emulator",
            "preferences": {},
        }
        target.write_text(yaml.safe_dump(config, sort_keys=False))
        return target

    def _record(self, request: RecordedRequest) -> None:
        with self._requests_lock:
            self._requests.append(request)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._requests_lock:
            return list(self._requests)

    @property
    def open_watches(self) -> int:
        """How many watch streams are open now."""
        return self._call(lambda: len(self.registry.store.watchers()))

    def reset_requests(self) -> None:
        with self._requests_lock:
            self._requests.clear()

    def compact(self) -> None:
        """Forget the event history: lists and watches from an older resourceVersion get 410."""
        self._call(lambda: self.registry.store.compact())

    def break_watches(self) -> None:
        """Close every open watch stream from the server side (clients see the stream end)."""

        def close_all() -> None:
            for watcher in self.registry.store.watchers():
                self.registry.store.unwatch(watcher)
                watcher.close()

        self._call(close_all)

    def fail(self, verb: str, resource: str, *, subresource: str | None = None, code: int = 500,
             times: int = 1, cut: bool = False) -> None:
        """The next ``times`` requests with this verb (get, list, create, update, patch,
        delete, ...), resource plural and subresource answer ``code`` (413, 422, 429, 5xx)
        with the API server's Status, unprocessed (kubecoord_testkit.emulator.faults).
        ``cut``: they are processed instead, and the connection closes half-way through
        the answer's body (``code`` is not used)."""
        fault = Fault(verb, resource, subresource, code, times, cut)
        self._call(lambda: self._faults.add(fault))

    def pending_faults(self) -> int:
        """How many injected failures have not been used yet."""
        return self._call(self._faults.remaining)

    def clear_faults(self) -> None:
        self._call(self._faults.clear)

    def hang(self, hanging: bool = True) -> None:
        """While hanging, new requests are accepted but not answered; ``hang(False)``
        drops the held ones unanswered (they were never processed)."""

        def switch() -> None:
            assert self._released is not None
            if hanging:
                self._released.clear()
            else:
                self._released.set()

        self._call(switch)

    async def _wait_if_hung(self) -> bool:
        assert self._released is not None
        if self._released.is_set():
            return False
        self._held += 1
        try:
            await self._released.wait()
        finally:
            self._held -= 1
        return True

    def held(self) -> int:
        """How many requests are held by hang() now (a test waits for its call to arrive)."""
        return self._call(lambda: self._held)

    def objects(self, resource: str, namespace: str | None = None) -> list[JSON]:
        """Stored objects of a resource (``"leases"`` or ``"leases.coordination.k8s.io"``)."""

        def read() -> list[JSON]:
            rtype = self.registry.find(resource)
            return copy.deepcopy(self.registry.store.select(rtype.key, namespace)[0])

        return self._call(read)
