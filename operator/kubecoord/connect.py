"""connect(url) -> Coordinator: KIP-30's PluginLocator.

Backends are found through the entry-point group ``kubecoord.backends``: the entry's
name is the URL scheme, its value a factory ``factory(url: BackendURL, *, history,
**options) -> Coordinator`` that opens its event log with
kubecoord.history.open_event_log(history, backend=..., namespace=...). A third-party package adds a backend by declaring
such an entry point; kubecoord itself does not change. A backend's dependencies are
imported only when its scheme is used.

URL forms (``URL_FORMS``; each backend's module docstring has its options)::

    memory://                 a private in-process store
    memory://NAME             shared by every coordinator of this process using NAME
    kubernetes://NAMESPACE    Leases and ConfigMaps in NAMESPACE (kubernetes:// = the
                              namespace of the pod, or of the kubeconfig context)
    zookeeper://HOST:PORT[,HOST:PORT...]/CHROOT
    cassandra://HOST[:PORT][,HOST[:PORT]...]/KEYSPACE
    etcd://HOST[:PORT][,HOST[:PORT]...][/PREFIX]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from kubecoord.errors import InvalidArgumentError

if TYPE_CHECKING:  # annotations only: parse_url is on the command line's start-up path
    from kubecoord.api import Coordinator
    from kubecoord.history import HistoryTarget

ENTRY_POINT_GROUP = "kubecoord.backends"
URL_FORMS: dict[str, str] = {
    "memory": "memory://[NAME]",
    "kubernetes": "kubernetes://NAMESPACE",
    "zookeeper": "zookeeper://HOST:PORT[,...]/CHROOT",
    "cassandra": "cassandra://HOST[:PORT][,...]/KEYSPACE",
    "etcd": "etcd://HOST[:PORT][,...][/PREFIX]",
}
"""Scheme -> URL form of every backend kubecoord's own distribution declares, in the order
help texts name them. The one list: ``kubecoord --help`` and ``--url`` are written from it,
and tests/connect/test_backend_names.py checks that it, the help texts, the package description,
README.md and docs/index.md name every entry point of pyproject.toml."""

BUILTIN_SCHEMES = frozenset(URL_FORMS)
"""The schemes of kubecoord's own backends: the packages ``kubecoord.backends.SCHEME``, each
with a ``connect`` factory, declared as entry points too (pyproject.toml; tests check that
URL_FORMS, the folders and the entry points agree). A URL with one of them is parsed and
connected without scanning the installed distributions' entry points, which costs tens of
milliseconds a process (the ``kubecoord`` command's start-up)."""
BUILTIN_PACKAGE = "kubecoord.backends"


class BackendURL(NamedTuple):
    """A parsed coordinator URL: scheme://location/path.

    A NamedTuple, and urllib.parse imported by parse_url() alone: ``import kubecoord`` (so
    ``kubecoord --help``) must not pay for ``dataclasses`` (which imports ``inspect``) and
    ``urllib.parse`` (``ipaddress``)."""

    raw: str
    scheme: str
    location: str
    """Everything between '//' and the next '/': a name, a namespace, or host:port list."""
    path: str
    """The rest without its leading '/' ('' if absent): the ZooKeeper chroot."""

    @property
    def hosts(self) -> list[str]:
        return [host for host in self.location.split(",") if host]


class BackendFactory(Protocol):
    def __call__(self, url: BackendURL, *, history: HistoryTarget, **options: Any) -> Coordinator: ...


def installed_backends() -> dict[str, Any]:
    """Scheme -> entry point, for every backend installed in this environment."""
    from importlib.metadata import entry_points  # ~20-40 ms: only when a scheme is looked up

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def parse_url(url: str) -> BackendURL:
    """Split a coordinator URL; raises InvalidArgumentError naming the installed backends."""
    if not isinstance(url, str):
        raise InvalidArgumentError(f"the coordinator URL must be a str, got {type(url).__name__}")
    import urllib.parse

    parsed = urllib.parse.urlsplit(url)
    ours = parsed.scheme in BUILTIN_SCHEMES and "://" in url  # no need to scan the entry points
    known = [parsed.scheme] if ours else sorted(installed_backends())
    if not parsed.scheme or "://" not in url:
        raise InvalidArgumentError(
            f"malformed coordinator URL {url!r}: expected SCHEME://..., installed backends: {', '.join(known)}"
        )
    if parsed.scheme not in known:
        raise InvalidArgumentError(
            f"unknown backend {parsed.scheme!r} in {url!r}; installed backends: {', '.join(known)}"
        )
    if parsed.query or parsed.fragment:
        raise InvalidArgumentError(f"coordinator URL {url!r}: pass options as keyword arguments, not ?query")
    return BackendURL(raw=url, scheme=parsed.scheme, location=parsed.netloc, path=parsed.path.lstrip("/"))


def connect(
    url: str,
    *,
    history: HistoryTarget = None,
    **options: Any,
) -> Coordinator:
    """Connect to the backend named by ``url``'s scheme.

    ``history``: where to append the coordination event log (a path or a text file
    object); defaults to $KUBECOORD_HISTORY, and to no log when that is unset.
    Other keyword options go to the backend (see its module docstring). A scheme's
    backend is looked up once per process: kubecoord's own by folder, any other among
    the installed entry points.
    """
    backend_url = parse_url(url)
    _silent_unless_configured()
    return _factory(backend_url.scheme)(backend_url, history=history, **options)


_factories: dict[str, BackendFactory] = {}


def _factory(scheme: str) -> BackendFactory:
    """The scheme's factory, looked up once per process: scanning the installed
    distributions' entry points (~13 ms) costs fifty times a whole connect("memory://")
    (~0.3 ms), so kubecoord's own schemes are imported by folder. Only schemes found are
    kept, so a backend installed later is still found; one replaced under a running
    process keeps its loaded module, as any import does."""
    factory = _factories.get(scheme)
    if factory is None:
        if scheme in BUILTIN_SCHEMES:
            from importlib import import_module

            factory = import_module(f"{BUILTIN_PACKAGE}.{scheme}").connect
        else:
            factory = installed_backends()[scheme].load()
        _factories[scheme] = factory
    return factory


def _silent_unless_configured() -> None:
    """Give the "kubecoord" logger a NullHandler, once, as a library should: without any
    logging configuration its records are then dropped rather than printed by logging's
    last-resort handler. Here rather than in ``kubecoord/__init__``: everything that logs
    is reached through connect(), and ``import kubecoord`` stays free of ``logging``."""
    import logging

    logger = logging.getLogger("kubecoord")
    if not any(isinstance(handler, logging.NullHandler) for handler in logger.handlers):
        logger.addHandler(logging.NullHandler())
