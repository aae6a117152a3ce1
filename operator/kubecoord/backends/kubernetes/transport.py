"""The one HTTP client of the Kubernetes floor: where and as whom a request goes (the one
credential rule's configuration, config.py, through endpoint.py), and how it is sent.

Used by the kubernetes backend (client.py, its namespaced verbs and error translation)
and by the operator (kubecoord.operator.kubeapi, its own requests): one class, so both
send where and as whom the rule says, with the same timeouts and the same account of
what reached the server.

Two faces of one client, as each caller needs: ``request`` blocks its thread (the
backend's handles, the operator's one-shot calls); ``arequest`` runs on the caller's event
loop (the operator's controller workers: no thread per request in flight — profiled at
2,000 resources, the thread hand-over, serialisation and header parsing of a blocking
client per request cost a quarter of the operator's CPU, and at most as many requests
were in flight as an executor had threads).

The blocking face is pykube-ng's HTTPClient: its requests session and its
kubeconfig adapter (TLS: CA, client certificate, server name), built here from the
configuration's server and TLS files, not from a kubeconfig of its own. Each request
carries the credentials as the configuration has them at that moment (the bearer token
through its refresh hook, so a rotated in-cluster token is used at once; basic auth), as
``Endpoint.request_headers`` reads them. requests sends through urllib3, so a failure is
the same urllib3 exception the official client's REST layer saw; it arrives wrapped
(requests' ConnectTimeout around urllib3's MaxRetryError around ConnectTimeoutError) and
is judged here on the urllib3 exception underneath, never on requests' class names
(requests calls a refused connection and a reset after sending both ConnectionError).

The asynchronous face is aiohttp (one session, one connection pool, per event loop),
going where and as whom the blocking face goes (the same Endpoint: TLS context, server
name, headers with the credentials read per request). No library makes these requests on
an asyncio loop from the credential rule's configuration: pykube-ng and the official
client block a thread per request, kopf's aiohttp client is private to kopf
(``kopf._cogs``), kubernetes_asyncio is a second whole client with its own configuration
loader. aiohttp is imported by the first asynchronous request (the backend makes none, and
its extra does not bring aiohttp; the operator's does, for kopf). A configuration with an
HTTP(S) proxy sends asynchronous requests through the blocking face in a thread. aiohttp
would send a GET, PUT or DELETE a second time when its connection broke after sending
(its "idempotent" retry, even for a PUT with a resourceVersion precondition, which then
answers 409 for its own applied write): that retry is off on these sessions (the one
switch aiohttp has, the attribute its own test client sets).

What reached the server (``TransportError.sent``):

=============================================  ===============================================
what happened                                  TransportError
=============================================  ===============================================
connection refused, unresolvable, no           sent=False: never reached the server
connection within the connect timeout,
credentials unavailable (the token refresh)
anything after the connection was made: a      sent=True: it may have reached the server and
reset, a read timeout, a TLS error, an         been applied
answer that broke off half-way; on the
asynchronous face, a timeout once connected
(it bounds the whole request)
=============================================  ===============================================

A request is sent once: requests' adapter is left at no retries (``Retry(0, read=False)``;
a Configuration's ``retries`` setting, which the official client would honour, plays no
part), redirects are not followed, and pykube's re-send on 401 applies only to auth
providers that set no Authorization header (these requests carry theirs, or none).
``resend_if_closed`` (for reads only: the caller says which are) sends a request a second
time when its connection closed before any answer (a kept-alive connection the server or
a middlebox closed while idle; urllib3 drops it, so the second goes on a fresh one).

Answers are read to their end here, whatever their status: the caller decides what an
error status means. Not guaranteed: a total bound on a blocking request's duration — its
read timeout bounds each wait for data (an asynchronous request's timeout is total).
HTTP(S) proxies from the configuration are used (``no_proxy`` honoured). The CA that
checks the server is the configuration's on both faces (the kubeconfig's
certificate-authority or its data, the pod's ca.crt), never one from the environment:
neither REQUESTS_CA_BUNDLE nor pykube's own override, PYKUBE_SSL_CERTIFICATE_AUTHORITY,
which the one credential rule (config.py) does not read.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import threading
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pykube
import requests
import urllib3.exceptions
from kubernetes.config.config_exception import ConfigException
from pykube.http import KubernetesHTTPAdapter

from kubecoord import __version__
from kubecoord.backends.kubernetes.endpoint import Endpoint, bypass_proxy
from kubecoord.errors import InvalidArgumentError

if TYPE_CHECKING:
    import aiohttp

POOL_SIZE = 32
"""Connections kept per server: one per thread with a request in flight (the backend's
handles, the operator's executor threads) without opening one per request."""
USER_AGENT = f"kubecoord/{__version__}"


class TransportError(ConnectionError):
    """A request that got no (whole) answer. ``sent`` is False only when it provably never
    reached the server; ``closed_before_answering``: the connection closed before any answer
    (the one case a read is sent again)."""

    def __init__(self, message: str, *, sent: bool, closed_before_answering: bool = False) -> None:
        super().__init__(message)
        self.sent = sent
        self.closed_before_answering = closed_before_answering


@dataclass(frozen=True)
class Answer:
    """An answer read to its end (and what the official client's ApiException reads of one)."""

    status: int
    reason: str
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)

    def getheaders(self) -> dict[str, str]:
        return self.headers


class _Adapter(KubernetesHTTPAdapter):  # type: ignore[misc]
    """pykube's adapter with the configuration's proxy headers and hostname check."""

    def __init__(self, kube_config: pykube.KubeConfig, configuration: Any, **kwargs: Any) -> None:
        self._configuration = configuration
        super().__init__(kube_config, **kwargs)
        if configuration.assert_hostname is False:
            self.poolmanager.connection_pool_kw["assert_hostname"] = False

    def _setup_request_certificates(self, config: pykube.KubeConfig, request: Any, kwargs: dict[str, Any]) -> None:
        # The CA is the configuration's, as on the asynchronous face (endpoint.py): pykube
        # would let $PYKUBE_SSL_CERTIFICATE_AUTHORITY replace it, which the one credential
        # rule (config.py) does not read.
        verify = kwargs.get("verify", True)
        super()._setup_request_certificates(config, request, kwargs)
        if "certificate-authority" in config.cluster:
            kwargs["verify"] = config.cluster["certificate-authority"].filename()
        elif "insecure-skip-tls-verify" in config.cluster:
            kwargs["verify"] = not config.cluster["insecure-skip-tls-verify"]
        else:
            kwargs["verify"] = verify

    def proxy_headers(self, proxy: str) -> dict[str, str]:
        headers: dict[str, str] = super().proxy_headers(proxy)
        headers.update({str(k): str(v) for k, v in (self._configuration.proxy_headers or {}).items()})
        return headers

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        # The server's TLS name and hostname check hold through a proxy's tunnel too: pykube
        # and __init__ set them on the direct pool manager only, and requests builds a
        # proxy's manager without them.
        tls = {key: value for key, value in self._tls_names().items() if key not in proxy_kwargs}
        return super().proxy_manager_for(proxy, **tls, **proxy_kwargs)

    def _tls_names(self) -> dict[str, Any]:
        """What pykube's send would put on the direct pool manager (tls-server-name), else
        the configuration's hostname check."""
        server_name = self._configuration.tls_server_name
        if server_name:
            return {"server_hostname": str(server_name), "assert_hostname": str(server_name)}
        return {"assert_hostname": False} if self._configuration.assert_hostname is False else {}


def pykube_config(configuration: Any) -> pykube.KubeConfig:
    """A pykube KubeConfig for where ``configuration`` goes: server, CA, TLS server name,
    client certificate (files the official loader wrote). No credentials: each request
    carries them."""
    cluster: dict[str, Any] = {"server": str(configuration.host).rstrip("/")}
    if configuration.ssl_ca_cert:
        cluster["certificate-authority"] = str(configuration.ssl_ca_cert)
    elif getattr(configuration, "ca_cert_data", None):
        data = configuration.ca_cert_data
        cluster["certificate-authority-data"] = base64.b64encode(data if isinstance(data, bytes) else data.encode())
    if not configuration.verify_ssl:
        cluster["insecure-skip-tls-verify"] = True
    if configuration.tls_server_name:
        cluster["tls-server-name"] = str(configuration.tls_server_name)
    user: dict[str, Any] = {}
    if configuration.cert_file:
        user["client-certificate"] = str(configuration.cert_file)
        user["client-key"] = str(configuration.key_file or configuration.cert_file)
    return pykube.KubeConfig({
        "apiVersion": "v1", "kind": "Config", "current-context": "kubecoord",
        "clusters": [{"name": "kubecoord", "cluster": cluster}],
        "users": [{"name": "kubecoord", "user": user}],
        "contexts": [{"name": "kubecoord", "context": {"cluster": "kubecoord", "user": "kubecoord"}}],
    })


class Transport:
    """Requests to one API server as one identity (a kubernetes Configuration, as the one
    credential rule resolved it). Thread-safe. InvalidArgumentError when built from TLS
    files (CA, client certificate and key) that cannot be used."""

    def __init__(self, configuration: Any, *, user_agent: str = USER_AGENT, pool_size: int = POOL_SIZE) -> None:
        self.configuration = configuration
        try:  # the TLS files are read here (the Endpoint's context, pykube's kubeconfig)
            self.endpoint = Endpoint.from_configuration(configuration, user_agent=user_agent)
            kube_config = pykube_config(configuration)
            self._adapter = _Adapter(kube_config, configuration, pool_maxsize=pool_size)
            self._http = pykube.HTTPClient(kube_config, http_adapter=self._adapter)
        except (OSError, ValueError, pykube.exceptions.PyKubeError) as exc:  # ssl.SSLError is an OSError
            raise InvalidArgumentError(
                f"kubernetes: cannot use the TLS files for {configuration.host}: {type(exc).__name__}: {exc}"
            ) from None
        self._url = self._http.url.rstrip("/")
        # Where the configuration says, not where the environment would send requests
        # (HTTP(S)_PROXY, netrc, REQUESTS_CA_BUNDLE).
        self.session.trust_env = False
        self._proxied = bool(configuration.proxy) and not bypass_proxy(
            str(configuration.host), configuration.no_proxy or ""
        )
        if self._proxied:
            self.session.proxies = {"http": str(configuration.proxy), "https": str(configuration.proxy)}
        self._loop_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
            weakref.WeakKeyDictionary()
        )
        self._loop_lock = threading.Lock()

    @property
    def session(self) -> requests.Session:
        """The blocking face's requests session (pykube's)."""
        return self._http.session  # type: ignore[no-any-return]

    def close(self) -> None:
        """Close the kept-alive connections (one in flight is closed when its request ends),
        and the event loops' sessions on those loops (``aclose`` closes one at once).
        urllib3 2's PoolManager.clear(), all requests' close() calls, only forgets its pools,
        leaving their sockets open until the collector finds them."""
        with self._loop_lock:
            sessions, self._loop_sessions = list(self._loop_sessions.items()), weakref.WeakKeyDictionary()
        for loop, session in sessions:
            if not session.closed and loop.is_running():
                loop.call_soon_threadsafe(_close_soon, session)
        for manager in [self._adapter.poolmanager, *self._adapter.proxy_manager.values()]:
            for key in manager.pools.keys():  # noqa: SIM118 (the container refuses iteration; keys() copies)
                pool = manager.pools.get(key)
                if pool is not None:
                    pool.close()
        self.session.close()

    # -- the blocking face ----------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        query: Iterable[tuple[str, str]] = (),
        headers: Mapping[str, str] | None = None,
        timeout: float,
        connect_timeout: float | None = None,
        resend_if_closed: bool = False,
    ) -> Answer:
        """One request; the answer whatever its status, or TransportError (module docstring).
        ``timeout`` bounds each wait for the answer's data, ``connect_timeout`` (default
        ``timeout``) the connection's opening; ``headers`` come after the credentials'."""
        what = f"{method} {path.partition('?')[0]}"
        attempts = 2 if resend_if_closed else 1
        for attempt in range(1, attempts + 1):
            try:
                return self._send(method, path, body, list(query), headers, timeout, connect_timeout, what)
            except TransportError as error:
                if attempt == attempts or not error.closed_before_answering:
                    raise
        raise AssertionError("unreachable")

    def _send(
        self, method: str, path: str, body: bytes | None, query: list[tuple[str, str]],
        headers: Mapping[str, str] | None, timeout: float, connect_timeout: float | None, what: str,
    ) -> Answer:
        try:
            sent_headers = {**self.endpoint.request_headers(), **(headers or {})}
        except ConfigException as exc:  # the in-cluster token's refresh hook, mid-request
            raise TransportError(f"{what}: credentials unavailable: {exc}", sent=False) from None
        if body is not None:
            sent_headers.setdefault("Content-Type", "application/json")
        try:
            answer = self.session.request(
                method, f"{self._url}{path}", params=query or None, data=body, headers=sent_headers,
                timeout=(timeout if connect_timeout is None else connect_timeout, timeout),
                allow_redirects=False, stream=True,
            )
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            cause = _urllib3_cause(exc)
            raise TransportError(
                f"{what}: {type(cause).__name__}: {cause}",
                sent=not isinstance(cause, urllib3.exceptions.ConnectTimeoutError),
                closed_before_answering=_closed_before_answering(cause),
            ) from None
        try:
            # Read whole here, inside the translation (the body arrives after the status).
            data = answer.content
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            cause = _urllib3_cause(exc)
            raise TransportError(
                f"{what}: the answer broke off ({type(cause).__name__}: {cause})", sent=True
            ) from None
        finally:
            answer.close()
        return Answer(answer.status_code, answer.reason or "", data or b"", dict(answer.headers))


    # -- the asynchronous face -------------------------------------------------------------
    async def arequest(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float,
        resend_if_closed: bool = False,
    ) -> Answer:
        """``request`` on the running event loop: the answer whatever its status, or
        TransportError. ``timeout`` bounds the whole request."""
        if self._proxied:
            return await asyncio.to_thread(self.request, method, path, body=body, headers=headers, timeout=timeout,
                                           resend_if_closed=resend_if_closed)
        what = f"{method} {path.partition('?')[0]}"
        attempts = 2 if resend_if_closed else 1
        for attempt in range(1, attempts + 1):
            try:
                return await self._asend(method, path, body, headers, timeout, what)
            except TransportError as error:
                if attempt == attempts or not error.closed_before_answering:
                    raise
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        """Close the running loop's session (before the loop ends)."""
        with self._loop_lock:
            session = self._loop_sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.close()

    def _loop_session(self) -> aiohttp.ClientSession:
        import aiohttp

        loop = asyncio.get_running_loop()
        with self._loop_lock:
            session = self._loop_sessions.get(loop)
            if session is None or session.closed:
                session = aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(ssl=self.endpoint.tls or False, limit=64),
                    # No cookie jar: the API server sets none, and aiohttp's jar would parse
                    # every answer's headers for them.
                    cookie_jar=aiohttp.DummyCookieJar(),
                    # Bodies are JSON already serialised here; answers asked uncompressed.
                    auto_decompress=False,
                )
                session._retry_connection = False  # sent once (module docstring)
                self._loop_sessions[loop] = session
            return session

    async def _asend(
        self, method: str, path: str, body: bytes | None, headers: Mapping[str, str] | None, timeout: float,
        what: str,
    ) -> Answer:
        import aiohttp

        session = self._loop_session()
        try:
            # identity: the API server compresses answers above 128 KiB for a client that
            # offers gzip, and this session does not decompress.
            sent_headers = {**self.endpoint.request_headers(), "Accept-Encoding": "identity", **(headers or {})}
        except ConfigException as exc:
            raise TransportError(f"{what}: credentials unavailable: {exc}", sent=False) from None
        if body is not None:
            sent_headers.setdefault("Content-Type", "application/json")
        try:
            answer = await session.request(
                method, f"{self._url}{path}", data=body, headers=sent_headers, allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=timeout), server_hostname=self.endpoint.server_hostname,
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            # Not sent: no connection (refused, unresolvable, none in time); a TLS error is
            # judged as the blocking face judges it.
            no_connection = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
            refused = isinstance(exc, no_connection) and not isinstance(exc, aiohttp.ClientSSLError)
            closed = isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)) and not isinstance(
                exc, aiohttp.ClientConnectorError
            )
            raise TransportError(f"{what}: {type(exc).__name__}: {exc}", sent=not refused,
                                 closed_before_answering=closed) from None
        try:
            data = await answer.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransportError(f"{what}: the answer broke off ({type(exc).__name__}: {exc})", sent=True) from None
        finally:
            answer.release()
        return Answer(answer.status, answer.reason or "", data, dict(answer.headers))


def _close_soon(session: aiohttp.ClientSession) -> None:
    """On the session's loop: close it in a task kept until it ends."""
    task = asyncio.get_running_loop().create_task(session.close())
    _closing.add(task)
    task.add_done_callback(_closing.discard)


_closing: set[asyncio.Task[None]] = set()


def _urllib3_cause(exc: BaseException) -> BaseException:
    """The urllib3 (or socket) exception under requests' wrapping of it."""
    cause = exc
    if isinstance(cause, requests.RequestException) and cause.args and isinstance(cause.args[0], BaseException):
        cause = cause.args[0]
    if isinstance(cause, urllib3.exceptions.MaxRetryError) and cause.reason is not None:
        cause = cause.reason
    return cause


def _closed_before_answering(cause: BaseException) -> bool:
    if not isinstance(cause, urllib3.exceptions.ProtocolError):
        return False
    inner = cause.args[1] if len(cause.args) > 1 else cause.__context__
    return isinstance(inner, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError))
