"""Requests to etcd's JSON gateway (``/v3/...``) through etcd3gw, over several endpoints.

Every unary call goes through ``Transport.call``: one etcd3gw client per endpoint, all on
one ``requests.Session`` (TLS settings, the auth token header, the connection pool). The
outcome of a failed request is classified once, here:

- *not sent* (the connection was refused or never opened): nothing reached the server;
  the next endpoint is tried, for writes too;
- *unanswered* (a timeout or reset after the request was sent, or an answer that broke off
  while its body was read): an idempotent request
  (a read, a keep-alive, a create-if-absent of a key only this session names) is sent
  again to the next endpoint until the deadline; any other write raises ``Unanswered``,
  whose outcome the caller resolves by reading (outcomes.py), never by sending it again;
- *answered with an error*: ``GatewayError`` with etcd's gRPC code and message, except an
  expired auth token, which is renewed and the request sent again (it was refused), and
  the refusals of authentication — a wrong user or password, a request without a user
  while authentication is on, a permission the user lacks — which are
  PermissionDeniedError.

An endpoint that fails to answer is moved past: the next request starts at the one after
it, so a hung member (frozen, or behind a dropping network) costs one request's timeout,
not every request's.

Watches are long-lived streams: ``open_stream`` posts on the same session with a read
timeout (etcd3gw's Watcher drops etcd's cancel and compaction answers and has no read
timeout, so watches.py reads the stream itself).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import requests
import urllib3.exceptions
from etcd3gw.client import Etcd3Client
from etcd3gw.exceptions import Etcd3Exception

from kubecoord.backends.etcd.options import Options
from kubecoord.errors import BackendUnavailableError, PermissionDeniedError

API_PATH = "/v3/"
"""etcd >= 3.4 serves the gateway here (etcd3gw would ask /version for it on every client)."""
UNAUTHENTICATED = 16
PERMISSION_DENIED = 7
INVALID_ARGUMENT = 3
_NO_USER = "user name is empty"
"""etcd's answer (InvalidArgument) to a request without a token when authentication is on."""
NOT_FOUND = 5
OUT_OF_RANGE = 11
"""etcd's code for a read at a revision it compacted away."""


def b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode("ascii")


def unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def prefix_end(prefix: str) -> str:
    """The range_end (base64) that, with key ``prefix``, selects every key under it."""
    raw = bytearray(prefix.encode())
    raw[-1] += 1  # prefixes here end in '/' (0x2f) or an ASCII character: no carry
    return b64(bytes(raw))


class GatewayError(Exception):
    """etcd answered with an error: its gRPC ``code`` and ``message``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"etcd error {code}: {message}")
        self.code = code
        self.message = message


class Unanswered(Exception):
    """A non-idempotent request was sent and its answer lost: it may have been applied."""


def _not_sent(exc: BaseException) -> bool:
    """Whether a transport failure happened before the request could reach the server."""
    cause = exc.__context__
    if isinstance(cause, requests.exceptions.ConnectTimeout):
        return True
    if isinstance(cause, requests.exceptions.ConnectionError) and cause.args:
        reason = getattr(cause.args[0], "reason", None)
        return isinstance(reason, urllib3.exceptions.NewConnectionError)
    return False


class _Session(requests.Session):
    """A requests session whose own ``verify`` (the ``tls`` option's CA) wins over
    ``REQUESTS_CA_BUNDLE`` and ``CURL_CA_BUNDLE``: plain requests lets those variables
    replace a session's CA, so an environment that sets them for its own services would
    make every request to an etcd with a private CA fail verification."""

    def merge_environment_settings(self, url: str, proxies: Any, stream: Any, verify: Any,
                                   cert: Any) -> dict[str, Any]:
        settings: dict[str, Any] = super().merge_environment_settings(
            url, proxies, stream, self.verify if verify is None else verify, cert)
        return settings


class Transport:
    """One session's HTTP access to the cluster's endpoints."""

    def __init__(self, hosts: list[tuple[str, int]], options: Options, *, timeout: float | None = None) -> None:
        self._options = options
        self._timeout = timeout if timeout is not None else options.request_timeout
        self.http = _Session()
        if options.tls is not None:
            self.http.verify = options.tls.get("ca_file", True)
            if "certfile" in options.tls:
                self.http.cert = (options.tls["certfile"], options.tls["keyfile"])
        self._clients = [
            Etcd3Client(host, port, protocol=options.scheme, timeout=self._timeout, api_path=API_PATH,
                        session=self.http)
            for host, port in hosts
        ]
        self._preferred = 0
        self._lock = threading.Lock()
        self._auth_lock = threading.Lock()

    def sibling(self, *, timeout: float) -> Transport:
        """A transport to the same endpoints, sharing this one's HTTP session (and auth
        token), whose requests time out after ``timeout`` seconds (the keep-alives)."""
        twin = Transport.__new__(Transport)
        twin.__dict__.update(self.__dict__)
        twin._timeout = timeout
        twin._clients = [
            Etcd3Client(c.host, c.port, protocol=c.protocol, timeout=timeout, api_path=API_PATH, session=self.http)
            for c in self._clients
        ]
        twin._lock = threading.Lock()
        return twin

    def authenticate(self) -> None:
        """Get an auth token for username/password (nothing to do without them)."""
        if self._options.username is None:
            return
        with self._auth_lock:
            self.http.headers.pop("Authorization", None)
            try:
                answer = self._attempts("auth/authenticate", {
                    "name": self._options.username, "password": self._options.password,
                }, idempotent=True, authenticate=False)
            except GatewayError as error:
                if error.code == INVALID_ARGUMENT:  # etcd's answer to a wrong user or password
                    raise PermissionDeniedError(
                        f"etcd refused user {self._options.username!r}: {error.message}") from None
                raise
            self.http.headers["Authorization"] = str(answer["token"])

    def call(self, path: str, body: dict[str, Any], *, idempotent: bool) -> dict[str, Any]:
        """POST ``body`` to ``/v3/PATH``; etcd's answer. Raises GatewayError (answered),
        Unanswered (a non-idempotent request's answer lost), BackendUnavailableError
        (nothing answered: not applied, or an idempotent request)."""
        return self._attempts(path, body, idempotent=idempotent, authenticate=True)

    def _attempts(self, path: str, body: dict[str, Any], *, idempotent: bool, authenticate: bool) -> dict[str, Any]:
        deadline = time.monotonic() + self._timeout
        last = ""
        renewed = False
        with self._lock:
            start = self._preferred
        for attempt in range(1000):
            index = (start + attempt) % len(self._clients)
            client = self._clients[index]
            try:
                answer: dict[str, Any] = client.post(client.get_url(path), json=body)
                with self._lock:
                    self._preferred = index
                return answer
            except (requests.exceptions.RequestException, ValueError) as exc:
                # The answer broke off while its body was read (etcd3gw catches only failures
                # before the headers): the request was sent, and maybe applied.
                self._move_on(index)
                if not idempotent:
                    raise Unanswered(f"{client.host}:{client.port}: {type(exc).__name__}") from None
                last = f"{client.host}:{client.port}: {type(exc).__name__}"
            except Etcd3Exception as exc:
                if exc.detail_text is None or not _is_answer(exc):
                    self._move_on(index)
                    if not _not_sent(exc) and not idempotent:
                        raise Unanswered(f"{client.host}:{client.port}: {exc.detail_text or exc}") from None
                    last = f"{client.host}:{client.port}: {exc.detail_text or type(exc).__name__}"
                else:
                    error = _gateway_error(exc.detail_text)
                    if error.code == UNAUTHENTICATED and authenticate and not renewed:
                        renewed = True
                        self.authenticate()
                        continue
                    no_user = error.code == INVALID_ARGUMENT and _NO_USER in error.message
                    if error.code == PERMISSION_DENIED or no_user:
                        raise PermissionDeniedError(f"etcd refused {path}: {error.message}") from None
                    if error.code in (14, 4, 13) and not idempotent:  # unavailable, deadline, internal
                        raise Unanswered(f"{client.host}:{client.port}: {error.message}") from None
                    if error.code in (14, 4) and time.monotonic() < deadline:
                        last = f"{client.host}:{client.port}: {error.message}"
                        time.sleep(0.05)
                        continue
                    raise error from None
            if time.monotonic() >= deadline:
                break
            if (attempt + 1) % len(self._clients) == 0:
                time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        raise BackendUnavailableError(f"etcd: no endpoint answered {path} within {self._timeout:g} s ({last})")

    def _move_on(self, index: int) -> None:
        """Endpoint ``index`` failed to answer: the next request starts at the next endpoint
        (a hung endpoint would otherwise take every request's whole timeout, keep-alives'
        included, while the others answer)."""
        with self._lock:
            if self._preferred == index:
                self._preferred = (index + 1) % len(self._clients)

    def open_stream(self, path: str, body: dict[str, Any], *, read_timeout: float) -> requests.Response:
        """A streaming POST to the preferred endpoint (the watches); BackendUnavailableError
        when it cannot be opened. The caller closes the response."""
        with self._lock:
            index = self._preferred
            self._preferred = (index + 1) % len(self._clients) if len(self._clients) > 1 else 0
        client = self._clients[index]
        try:
            response = self.http.post(
                client.get_url(path), json=body, stream=True, timeout=(self._timeout, read_timeout)
            )
        except requests.exceptions.RequestException as exc:
            raise BackendUnavailableError(f"etcd watch on {client.host}:{client.port}: {type(exc).__name__}") from None
        if response.status_code != 200:
            text = response.text
            response.close()
            raise _gateway_error(text)
        with self._lock:
            self._preferred = index
        return response

    def close(self) -> None:
        self.http.close()


def _is_answer(exc: Etcd3Exception) -> bool:
    """Whether etcd3gw raised for an HTTP error answer (a JSON body), not a transport failure."""
    try:
        body = json.loads(exc.detail_text or "")
    except ValueError:
        return False
    return isinstance(body, dict) and "code" in body


def _gateway_error(text: str | None) -> GatewayError:
    try:
        body = json.loads(text or "")
        return GatewayError(int(body.get("code", 2)), str(body.get("message") or body.get("error") or text))
    except (ValueError, AttributeError):
        return GatewayError(2, str(text)[:300])


def stream_lines(response: requests.Response) -> Iterator[dict[str, Any]]:
    """The JSON objects of a gateway stream, one per line (an empty line is skipped)."""
    for line in response.iter_lines():
        if line.strip():
            yield json.loads(line)
