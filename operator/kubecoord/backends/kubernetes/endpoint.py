"""Where and as whom a request goes, taken from the kubernetes client's Configuration:
the server (host, port, any path prefix), the TLS context (CA, client certificate,
``verify_ssl``, ``tls_server_name``), an HTTP(S) proxy (``no_proxy`` honoured) and each
request's headers with the credentials as the configuration has them at that moment
(the bearer token through its refresh hook, so a rotated in-cluster token is used at
once; basic auth).

Why hand-written: the blocking transport (pykube-ng's requests session, transport.py)
takes its TLS files from a kubeconfig of the configuration's making, but two request paths
run on an event loop — the backend's watches (watch_stream.py, all of a process's on the
one thread of watch_mux.py) and the transport's asynchronous face (aiohttp, the
operator's requests). No library turns a kubernetes Configuration into what an asyncio
connection needs (kubernetes_asyncio re-implements the whole client); this is the one
place that does, and every request's headers come from here, so all three go where and as
whom the one credential rule says.
"""

from __future__ import annotations

import ipaddress
import ssl
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from kubernetes.config.config_exception import ConfigException


@dataclass(frozen=True)
class Endpoint:
    """Where and as whom watches connect: taken once from a client's configuration."""

    host: str
    port: int
    prefix: str
    tls: ssl.SSLContext | None
    server_hostname: str | None
    configuration: Any = field(repr=False)
    headers: dict[str, str] = field(default_factory=dict)
    proxy: tuple[str, int] | None = None
    proxy_headers: dict[str, str] = field(default_factory=dict)
    unsupported: str | None = None

    @classmethod
    def from_configuration(
        cls, configuration: Any, *, user_agent: str, default_headers: dict[str, Any] | None = None
    ) -> Endpoint:
        url = urllib.parse.urlsplit(str(configuration.host))
        secure = url.scheme == "https"
        tls = _tls_context(configuration) if secure else None
        server_hostname = (configuration.tls_server_name or url.hostname) if secure else None
        headers = {"Accept": "application/json", "User-Agent": user_agent}
        headers.update({str(k): str(v) for k, v in (default_headers or {}).items()})
        proxy, proxy_headers, unsupported = None, {}, None
        if configuration.proxy and not bypass_proxy(str(configuration.host), configuration.no_proxy or ""):
            proxy_url = urllib.parse.urlsplit(str(configuration.proxy))
            if proxy_url.scheme not in ("http", "https"):
                unsupported = f"watches cannot go through the {proxy_url.scheme} proxy {configuration.proxy!r}"
            else:
                proxy = (proxy_url.hostname or "", proxy_url.port or (443 if proxy_url.scheme == "https" else 80))
                proxy_headers = {str(k): str(v) for k, v in (configuration.proxy_headers or {}).items()}
        return cls(
            host=url.hostname or "localhost", port=url.port or (443 if secure else 80),
            prefix=url.path.rstrip("/"), tls=tls, server_hostname=server_hostname,
            configuration=configuration, headers=headers, proxy=proxy, proxy_headers=proxy_headers,
            unsupported=unsupported,
        )

    def request_headers(self) -> dict[str, str]:
        """The headers of one request, with credentials as the configuration has them now;
        ConfigException when the configuration cannot produce them, whatever its refresh
        hook raised (the in-cluster loader re-opens the token file unchecked: an OSError;
        exec plugins, OIDC and GCP refreshes raise their own), or when a header cannot
        carry them (``_credential``): no request was sent."""
        try:
            settings = self.configuration.auth_settings()
        except ConfigException:
            raise
        except Exception as exc:  # the loader's code, not ours: any failure means no credentials
            raise ConfigException(f"{type(exc).__name__}: {exc}") from exc
        headers = dict(self.headers)
        for setting in settings.values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[str(setting["key"])] = _credential(str(setting["value"]))
        if self.configuration.username and self.configuration.password:
            headers["Authorization"] = str(self.configuration.get_basic_auth_token())
        return headers


def _credential(value: str) -> str:
    """A credential as its header carries it: without surrounding whitespace (a token file
    written with a final newline; HTTP drops a value's surrounding whitespace, and kubectl
    trims token files), and ConfigException for a line break or NUL inside, which would
    end the header (the watches write their request heads themselves)."""
    value = value.strip()
    if any(character in value for character in "\r\n\0"):
        raise ConfigException("the credentials hold a line break or NUL character")
    return value


def _tls_context(configuration: Any) -> ssl.SSLContext:
    context = ssl.create_default_context(
        cafile=configuration.ssl_ca_cert or None, cadata=getattr(configuration, "ca_cert_data", None) or None
    )
    if not configuration.verify_ssl or configuration.assert_hostname is False:
        context.check_hostname = False
    if not configuration.verify_ssl:
        context.verify_mode = ssl.CERT_NONE
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    return context


def bypass_proxy(url: str, no_proxy: str) -> bool:
    """Whether a request to ``url`` goes direct by ``no_proxy`` (comma-separated), as the
    official client's requests decide it: ``*``; a host name, its subdomains too (a leading
    dot optional); ``host:port``; for an address, a CIDR block holding it (a cluster-wide
    proxy's NO_PROXY names the service network so, and in a pod the API server is an
    address in it)."""
    split = urllib.parse.urlsplit(url)
    host = (split.hostname or "").lower()
    if not host:
        return True
    host_port = split.netloc.rpartition("@")[2].lower()
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*" or (address is not None and _holds(entry, address)):
            return True
        entry = entry.lstrip(".")
        if any(name == entry or name.endswith("." + entry) for name in (host, host_port)):
            return True
    return False


def _holds(block: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    try:
        return address in ipaddress.ip_network(block, strict=False)
    except ValueError:  # a name, or host:port
        return False
