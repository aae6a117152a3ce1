"""What every handle of one Kubernetes coordinator shares."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from kubecoord._core.handles import Handle
from kubecoord._internal.clock import Clock
from kubecoord._internal.dispatch import Dispatcher
from kubecoord.backends.kubernetes.cache import Change
from kubecoord.backends.kubernetes.client import KubeClient, Resource
from kubecoord.backends.kubernetes.informers import InformerPool
from kubecoord.backends.kubernetes.shared_informer import Informer
from kubecoord.errors import ClosedError
from kubecoord.history import EventLog
from kubecoord.timings import Timings


@dataclass(eq=False)
class KubernetesContext:
    client: KubeClient
    informers: InformerPool
    clock: Clock
    dispatcher: Dispatcher
    events: EventLog
    timings: Timings
    max_value_bytes: int
    kv_shards: int = 1
    bind_resources: bool = True
    """Shards of a store this coordinator creates without a KVStore resource (wire/kv_shards.py)."""
    closed: bool = False
    crashed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    backend: str = "kubernetes"

    @property
    def namespace(self) -> str:
        return self.client.namespace

    def check_open(self) -> None:
        if self.closed or self.crashed:
            raise ClosedError("this kubernetes coordinator was closed")


class HandleBase(Handle):
    """The core's handle scaffolding with this coordinator's context as the owner."""

    def __init__(self, context: KubernetesContext, name: str) -> None:
        super().__init__(context, name, context.events)
        self._context = context


class Watching:
    """What makes a handle fed by one of the coordinator's shared informers, started on
    first use (a mixin: the handle calls ``_init_watching`` from its constructor).

    Subclasses name what they watch (``_resource`` and ``_selector``), may receive changes
    in ``_on_changes`` and may start their own activity in ``_on_watching``.
    """

    _resource: Resource
    _context: KubernetesContext
    _closed: bool

    def _init_watching(self, context: KubernetesContext) -> None:
        self._context = context
        self._start_lock = threading.Lock()
        self._informer: Informer | None = None

    def _selector(self) -> dict[str, str]:
        """Keyword arguments for InformerPool.acquire: label_selector= or name=."""
        raise NotImplementedError

    def _on_changes(self, changes: list[Change]) -> None:
        """Changes observed by the informer (internal subscribers: quick, no informer calls)."""

    def _on_watching(self, informer: Informer) -> None:
        """Called once, when the informer has listed and is watching."""

    def _listener_added(self, first: bool) -> None:
        """A listener needs the watch: start it (a closed handle or a crashed coordinator does not)."""
        if not self._closed and not self._context.crashed:
            self._watching()

    def _watching(self) -> Informer:
        """The started informer (listing synchronously on first use: raises its errors)."""
        with self._start_lock:
            if self._informer is None:
                informer = self._context.informers.acquire(self._resource, **self._selector())
                informer.subscribe(self._on_changes)
                try:
                    informer.start()
                except BaseException:
                    informer.unsubscribe(self._on_changes)
                    self._context.informers.release(informer)
                    raise
                self._informer = informer
                self._on_watching(informer)
            return self._informer

    def _stop_watching(self) -> None:
        with self._start_lock:
            informer, self._informer = self._informer, None
        if informer is not None:
            informer.unsubscribe(self._on_changes)
            self._context.informers.release(informer)


class WatchingHandle(Watching, HandleBase):
    """A handle fed by one of the coordinator's shared informers, started on first use."""

    def __init__(self, context: KubernetesContext, name: str) -> None:
        super().__init__(context, name)
        self._init_watching(context)
