"""Which backend a command talks to: one URL, plus the kubeconfig options of kubernetes://.

Order: ``--url`` (or ``-n NAMESPACE``, short for ``kubernetes://NAMESPACE``), else
$KUBECOORD_URL, else ``kubernetes://`` (the kubeconfig context's namespace, as kubectl
does). ``memory://`` is refused: that backend lives inside one process, and the command
is another process.

Two ways to read: on kubernetes:// the state commands read once through kubeapi.py
(``one_shot``: a few GETs, no kubernetes client, no watch); everything else — writes,
``watch``, other backends, names whose resource keeps its data in another backend — opens
the backend through kubecoord.connect() (``open_coordinator``). ``read_state`` is a state
command's choice between the two.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from kubecoord.cli import REACHABLE_URL_FORMS
from kubecoord.cli.exits import UsageError
from kubecoord.connect import BackendURL, parse_url

if TYPE_CHECKING:
    from kubecoord.api import Coordinator
    from kubecoord.cli.kubeapi import KubeApi

ENV_URL = "KUBECOORD_URL"
DEFAULT_URL = "kubernetes://"
DEFAULT_TIMEOUT = 10.0

_T = TypeVar("_T")


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("connection")
    group.add_argument(
        "-u",
        "--url",
        metavar="URL",
        help=f"{', '.join(REACHABLE_URL_FORMS)} (default: ${ENV_URL}, else {DEFAULT_URL}, the kubeconfig "
        "context's namespace; memory:// lives inside one process, so a command cannot reach it)",
    )
    group.add_argument("-n", "--namespace", help="short for --url kubernetes://NAMESPACE")
    group.add_argument("--kubeconfig", help="kubeconfig path (kubernetes://; default $KUBECONFIG or ~/.kube/config)")
    group.add_argument("--context", help="kubeconfig context (kubernetes://; default: its current-context)")
    group.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"give up on an unreachable backend after this long (default {DEFAULT_TIMEOUT:g})",
    )


def resolve_url(args: argparse.Namespace) -> BackendURL:
    if args.url and args.namespace:
        raise UsageError("give --url or --namespace, not both")
    raw = args.url or (f"kubernetes://{args.namespace}" if args.namespace else None)
    raw = raw or os.environ.get(ENV_URL) or DEFAULT_URL
    url = parse_url(raw)
    if url.scheme == "memory":
        raise UsageError(
            "memory:// lives inside one process and this command is another one; "
            f"use {', '.join(REACHABLE_URL_FORMS)}"
        )
    if url.scheme != "kubernetes" and (args.kubeconfig or args.context):
        raise UsageError(f"--kubeconfig and --context apply to kubernetes:// only, not {url.scheme}://")
    return url


def _check_timeout(args: argparse.Namespace) -> None:
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be positive, not {args.timeout:g}")


def backend_options(url: BackendURL, args: argparse.Namespace) -> dict[str, Any]:
    _check_timeout(args)
    if url.scheme == "kubernetes":
        options: dict[str, Any] = {"request_timeout": args.timeout}
        if args.kubeconfig:
            options["kubeconfig"] = args.kubeconfig
        if args.context:
            options["context"] = args.context
        return options
    if url.scheme == "zookeeper":
        return {"connect_timeout": args.timeout, "request_timeout": args.timeout}
    if url.scheme == "etcd":
        return {"request_timeout": args.timeout}
    return {}


def open_coordinator(args: argparse.Namespace, **options: Any) -> Coordinator:
    """Connect as the command line says, plus ``options`` (backend options the command
    derived, e.g. lock's --ttl); the caller closes it (use it as a context manager)."""
    import kubecoord  # the interface and the backend: only on the full path

    log_setup = getattr(args, "log_setup", None)
    if log_setup is not None:  # a read command's log set-up, left to here by cli.CommandLine.main()
        from kubecoord.cli import logs

        logs.configure(*log_setup)
    url = resolve_url(args)
    return kubecoord.connect(url.raw, **backend_options(url, args), **options)


def open_api(args: argparse.Namespace, url: BackendURL) -> KubeApi:
    """The one-shot reader of kubernetes:// ``url`` (kubeapi.py); the caller closes it."""
    _check_timeout(args)
    from kubecoord.cli.kubeapi import KubeApi, load_credentials

    credentials = load_credentials(url.location, kubeconfig=args.kubeconfig, context=args.context)
    return KubeApi(credentials, timeout=args.timeout)


def check_declared(args: argparse.Namespace, plural: str, name: str, *, lease: bool = False,
                   create: bool = False) -> None:
    """On kubernetes://, refuse (exit 4) a missing namespace and a name no resource declares,
    before the command reads or writes anything: a typo must not read as "no leader" or
    create a store nobody declared. Other backends declare no names: nothing to check."""
    url = resolve_url(args)
    if url.scheme != "kubernetes":
        return
    from kubecoord.cli.resources import ResourceReader

    with open_api(args, url) as api:
        ResourceReader(api).check_declared(plural, name, lease=lease, create=create)


@contextlib.contextmanager
def one_shot(args: argparse.Namespace, plural: str, name: str, *, lease: bool = False) -> Iterator[KubeApi | None]:
    """For a state command: on kubernetes:// check ``name`` as check_declared() does and
    yield the reader when the data lives in Kubernetes objects (read them with snapshot.py);
    yield None when the command must open the backend instead (another scheme, or a
    resource whose spec.backend is another: binding.py decides there, as for applications)."""
    url = resolve_url(args)
    if url.scheme != "kubernetes":
        yield None
        return
    from kubecoord.cli.resources import ResourceReader, stored_in_kubernetes

    with open_api(args, url) as api:
        resource = ResourceReader(api).check_declared(plural, name, lease=lease)
        yield api if stored_in_kubernetes(resource) else None


def read_state(args: argparse.Namespace, plural: str, name: str, *, lease: bool = False,
               objects: Callable[[KubeApi], _T], backend: Callable[[Coordinator], _T]) -> _T:
    """A state command's read of ``name``: ``objects(reader)`` when one_shot() yields the
    one-shot reader (kubernetes://, the name checked first: exit 4 when no resource declares
    it), else ``backend(coordinator)`` on the backend open_coordinator() opens (the handles it
    opens close with the coordinator). Either way the command shows the same: cli/views.py
    and cli/snapshot.py read a handle and a snapshot alike."""
    with one_shot(args, plural, name, lease=lease) as api:
        if api is not None:
            return objects(api)
    with open_coordinator(args) as coord:
        return backend(coord)
