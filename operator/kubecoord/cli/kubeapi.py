"""A one-shot reader of the Kubernetes API on the standard library (ssl, http_get.py).

The state commands answer from a few GETs (``kubectl get`` does the same), so this module
reads instead of a client library. Neither library fits the command's budget (0.3 s):
importing ``kubernetes.config`` costs ~470 ms of CPU and ``pykube`` (with requests and
requests-oauthlib) ~290 ms, against ~10 ms for ``python -c pass`` and ~125 ms for a whole
``kubecoord leader NAME`` (CPU medians: ``/usr/bin/time -f %U+%S python -c "import
pykube"``, and bench/bench_cli.py). pykube-ng's credentials fall short too: it reads the
service-account token once (no rotation), no ``tokenFile``, exec plugins of
client.authentication.k8s.io v1alpha1 and v1beta1 only (not v1), run again for every
request. So: no watch, no
informer, one keep-alive connection, every request bounded by ``--timeout`` in total
(connect, TLS, headers and body: a hung or trickling server is exit 6, never a hang).

Credentials are chosen by the one rule the kubernetes backend uses
(kubecoord.wire.kube_credentials.kubeconfig_to_read: ``--kubeconfig``, else a pod's service
account, else $KUBECONFIG or ~/.kube/config with its current or ``--context``'s context; a
test checks that both pick the same server, identity and namespace for the same flags).

Of a kubeconfig it reads: ``server`` (http or https, with a path prefix),
``certificate-authority(-data)``, ``insecure-skip-tls-verify``, ``tls-server-name``;
users with ``token``, ``tokenFile``, ``client-certificate(-data)`` and
``client-key(-data)``, ``username``/``password``, or an ``exec`` credential plugin
(client.authentication.k8s.io v1 and v1beta1: a token or a client certificate).
Not supported: ``auth-provider`` (removed from kubectl but for oidc; use an exec plugin
such as kubelogin) — a clear error, exit 2. Relative file paths are relative to the
kubeconfig's folder, as client-go reads them.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import urllib.parse
from pathlib import Path
from typing import Any, NamedTuple

from kubecoord.cli.exits import UsageError
from kubecoord.cli.http_get import Connection, Deadline
from kubecoord.errors import BackendUnavailableError, InvalidArgumentError, PermissionDeniedError
from kubecoord.wire import json_text
from kubecoord.wire.api_status import translate_status
from kubecoord.wire.kube_credentials import SERVICE_ACCOUNT_DIR, kubeconfig_to_read, pod_namespace

EXEC_TIMEOUT = 30.0


class Credentials(NamedTuple):
    """Where the API server is and who we are, as the kubeconfig or the pod says (a
    NamedTuple: ``dataclasses`` imports ``inspect``, about 10 ms of the command's start-up)."""

    server: str
    namespace: str
    source: str
    """"in-cluster" or the kubeconfig path."""
    ca_file: str | None = None
    ca_data: str | None = None
    insecure: bool = False
    server_name: str | None = None
    token: str | None = None
    token_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = None
    basic: tuple[str, str] | None = None
    exec_spec: dict[str, Any] | None = None

    def __repr__(self) -> str:
        """Without exec_spec (the plugin's environment may hold secrets)."""
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self, strict=True)
                          if name != "exec_spec")
        return f"Credentials({shown})"


def load_credentials(
    namespace: str = "",
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
) -> Credentials:
    """Resolve the credentials as the module docstring says; InvalidArgumentError if none."""
    path = kubeconfig_to_read(kubeconfig, service_account_dir)
    if path is None:
        host = os.environ["KUBERNETES_SERVICE_HOST"]
        host = f"[{host}]" if ":" in host else host
        return Credentials(
            server=f"https://{host}:{os.environ['KUBERNETES_SERVICE_PORT']}",
            namespace=namespace or pod_namespace(service_account_dir),
            source="in-cluster",
            ca_file=str(service_account_dir / "ca.crt"),
            token_file=str(service_account_dir / "token"),
        )
    try:
        return _from_kubeconfig(Path(path), namespace, context)
    except UsageError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidArgumentError(f"kubernetes backend: cannot load kubeconfig {path!r}: {exc}") from None


def _named(items: Any, name: str, what: str) -> dict[str, Any]:
    for item in items or []:
        if item.get("name") == name:
            return dict(item.get(what) or {})
    raise ValueError(f"no {what} named {name!r}")


def _from_kubeconfig(path: Path, namespace: str, context: str | None) -> Credentials:
    import yaml  # a kubeconfig is YAML (its C loader: a few milliseconds)

    text = path.read_text()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        config = yaml.load(text, Loader=loader) or {}
    except yaml.YAMLError as exc:  # not a ValueError: say it as one, for load_credentials
        raise ValueError(f"not YAML: {exc}") from None
    if not isinstance(config, dict):
        raise ValueError("not a kubeconfig (a mapping is expected)")
    chosen = context or config.get("current-context")
    if not chosen:
        raise ValueError("no current-context and no --context")
    ctx = _named(config.get("contexts"), chosen, "context")
    cluster = _named(config.get("clusters"), ctx["cluster"], "cluster")
    user = _named(config.get("users"), ctx["user"], "user") if ctx.get("user") else {}
    base = path.parent

    def local(value: str | None) -> str | None:
        return None if not value else str(value if os.path.isabs(value) else base / value)

    def data(value: str | None) -> bytes | None:
        return base64.b64decode(value) if value else None

    if user.get("auth-provider"):
        name = (user["auth-provider"] or {}).get("name", "?")
        raise UsageError(
            f"kubeconfig {str(path)!r}: user {ctx['user']!r} uses auth-provider {name!r}, which kubecoord's command "
            "does not read; use an exec credential plugin (e.g. kubelogin for oidc), as kubectl does since 1.26"
        )
    ca_data = data(cluster.get("certificate-authority-data"))
    basic = (str(user["username"]), str(user.get("password") or "")) if user.get("username") else None
    return Credentials(
        server=str(cluster["server"]).rstrip("/"),
        namespace=namespace or ctx.get("namespace") or "default",
        source=str(path),
        ca_file=local(cluster.get("certificate-authority")),
        ca_data=ca_data.decode("ascii") if ca_data else None,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        server_name=cluster.get("tls-server-name"),
        token=user.get("token"),
        token_file=local(user.get("tokenFile")),
        cert_file=local(user.get("client-certificate")),
        key_file=local(user.get("client-key")),
        cert_data=data(user.get("client-certificate-data")),
        key_data=data(user.get("client-key-data")),
        basic=basic,
        exec_spec=user.get("exec"),
    )


class KubeApi:
    """GETs against one API server on one keep-alive connection; use as a context manager."""

    def __init__(self, credentials: Credentials, *, timeout: float) -> None:
        self.credentials = credentials
        self.namespace = credentials.namespace
        self.timeout = timeout
        self.requests = 0
        """Requests sent (the benchmark and the tests count them)."""
        self._answers: dict[str, tuple[int, bytes]] = {}
        parsed = urllib.parse.urlsplit(credentials.server)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise InvalidArgumentError(f"kubeconfig {credentials.source!r}: bad server URL {credentials.server!r}")
        self._parsed = parsed
        self._prefix = parsed.path.rstrip("/")
        self._headers = {"Accept": "application/json", "User-Agent": "kubecoord-cli"}
        self._context: ssl.SSLContext | None = None
        self._connection: Connection | None = None
        self._authenticated = False

    def __enter__(self) -> KubeApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # -- credentials ----------------------------------------------------------------------
    def _authenticate(self) -> None:
        """Headers and TLS context once, on the first request (an exec plugin runs then)."""
        if self._authenticated:
            return
        c = self.credentials
        token, cert, key = c.token, c.cert_data, c.key_data
        if c.exec_spec:
            token, cert, key = _run_exec(c.exec_spec, c.source)
        elif not token and c.token_file:
            token = _read_token(c.token_file)
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        elif c.basic:
            encoded = base64.b64encode(f"{c.basic[0]}:{c.basic[1]}".encode()).decode("ascii")
            self._headers["Authorization"] = f"Basic {encoded}"
        if self._parsed.scheme == "https":
            self._context = _tls_context(c, cert, key)
        self._authenticated = True

    # -- requests -------------------------------------------------------------------------
    def get(self, path: str, *, verb: str, plural: str, name: str | None = None) -> dict[str, Any] | None:
        """The JSON object at ``path`` (below the server's URL); None when the API answers 404.
        Other errors are kubecoord errors (wire/api_status.py), naming ``verb plural name``."""
        status, body = self.request(path)
        if status == 404:
            return None
        if status >= 400:
            raise translate_status(status, body, verb, plural, name, self.namespace)
        try:
            return json_text.loads_object(body or b"{}")
        except ValueError as exc:
            raise BackendUnavailableError(f"{verb} {plural}: the API server answered no JSON object ({exc})") from None

    def request(self, path: str) -> tuple[int, bytes]:
        """(HTTP status, body) of one GET, within ``timeout`` seconds in all (exit 6 past it).
        A keep-alive connection the server closed meanwhile is reopened once (GETs repeat safely).
        A path is read once per reader: a command shows one moment, and checking that a Lease
        exists then showing it is one request, not two."""
        if path not in self._answers:
            self._answers[path] = self._request(path)
        return self._answers[path]

    def _request(self, path: str) -> tuple[int, bytes]:
        self._authenticate()
        deadline = Deadline(self.timeout)
        for attempt in (1, 2):
            reused = self._connection is not None
            try:
                connection = self._connection or self._connect(deadline)
                self._connection = connection
                self.requests += 1
                answer = connection.get(self._prefix + path, self._headers, deadline)
                if not connection.open:
                    self.close()
                return answer
            except TimeoutError:
                self.close()
                raise BackendUnavailableError(
                    f"the API server at {self.credentials.server} did not answer within {self.timeout:g} s "
                    f"(GET {path}; --timeout)"
                ) from None
            except (BrokenPipeError, ConnectionResetError) as exc:
                self.close()
                if not reused or attempt == 2:
                    raise self._unreachable(exc) from None
            except OSError as exc:  # refused, unreachable, TLS (ssl.SSLError), a garbled answer
                self.close()
                raise self._unreachable(exc) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _unreachable(self, exc: BaseException) -> BackendUnavailableError:
        return BackendUnavailableError(
            f"cannot reach the API server at {self.credentials.server}: {type(exc).__name__}: {exc}"
        )

    def _connect(self, deadline: Deadline) -> Connection:
        default_port = 443 if self._parsed.scheme == "https" else 80
        return Connection(self._parsed.hostname or "", self._parsed.port or default_port, context=self._context,
                          server_name=self.credentials.server_name, deadline=deadline)


def _read_token(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read the token file {path!r}: {exc}") from None


def _tls_context(c: Credentials, cert: bytes | None, key: bytes | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=c.ca_file, cadata=c.ca_data)
    if c.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if c.cert_file and c.key_file:
        context.load_cert_chain(c.cert_file, c.key_file)
    elif cert and key:
        import tempfile

        # ssl loads a certificate from files only: a private folder, removed at once.
        with tempfile.TemporaryDirectory(prefix="kubecoord-") as folder:
            cert_path, key_path = Path(folder, "tls.crt"), Path(folder, "tls.key")
            cert_path.write_bytes(cert)
            key_path.touch(mode=0o600)
            key_path.write_bytes(key)
            context.load_cert_chain(str(cert_path), str(key_path))
    return context


def _run_exec(spec: dict[str, Any], source: str) -> tuple[str | None, bytes | None, bytes | None]:
    """(token, client certificate, client key) from an exec credential plugin."""
    import subprocess

    api_version = str(spec.get("apiVersion") or "client.authentication.k8s.io/v1")
    command = [str(spec["command"]), *(str(a) for a in spec.get("args") or [])]
    env = {**os.environ, **{str(e["name"]): str(e["value"]) for e in spec.get("env") or []}}
    env["KUBERNETES_EXEC_INFO"] = json.dumps(
        {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    )
    try:
        done = subprocess.run(command, env=env, capture_output=True, timeout=EXEC_TIMEOUT, check=False,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PermissionDeniedError(f"kubeconfig {source!r}: the exec credential plugin {command[0]!r} "
                                    f"failed: {type(exc).__name__}: {exc}") from None
    if done.returncode:
        raise PermissionDeniedError(
            f"kubeconfig {source!r}: the exec credential plugin {command[0]!r} exited {done.returncode}: "
            + done.stderr.decode("utf-8", "replace").strip()[:300]
        )
    try:
        status = json.loads(done.stdout)["status"]
    except (ValueError, KeyError, TypeError):
        raise PermissionDeniedError(
            f"kubeconfig {source!r}: the exec credential plugin {command[0]!r} printed no ExecCredential status"
        ) from None
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    return status.get("token"), cert.encode() if cert else None, key.encode() if key else None
