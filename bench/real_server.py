"""The real kube-apiserver for benchmarks (../shared/k8s, as the tests start it) and its
request counter: apiserver_request_total, which counts what a client really asked."""

from __future__ import annotations

import collections
import contextlib
import pathlib
import re
import ssl
import tempfile
import urllib.request
from collections.abc import Iterator

from kubecoord_testkit.servers.kubernetes import BinariesNotFound, RealApiServer, find_binaries

ROOT = pathlib.Path(__file__).resolve().parents[1]


class RequestCounter:
    """The API server's apiserver_request_total summed over resource requests."""

    def __init__(self, server: RealApiServer) -> None:
        self._url = f"{server.url}/metrics"
        self._context = ssl.create_default_context(cafile=str(server.pki / "ca.crt"))
        self._context.load_cert_chain(str(server.pki / "admin.crt"), str(server.pki / "admin.key"))

    def total(self, verb: str | None = None) -> int:
        return sum(n for (v, _), n in self.by_request().items() if verb is None or v == verb)

    def by_request(self) -> collections.Counter[tuple[str, str]]:
        """Requests so far by (verb, resource), e.g. ("PUT", "leases")."""
        with urllib.request.urlopen(self._url, context=self._context, timeout=30) as response:
            text = response.read().decode()
        counts: collections.Counter[tuple[str, str]] = collections.Counter()
        for line in text.splitlines():
            if not line.startswith("apiserver_request_total{"):
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]))
            if labels.get("resource"):
                counts[labels.get("verb", ""), labels["resource"]] += int(float(line.rsplit(" ", 1)[1]))
        return counts


@contextlib.contextmanager
def real_server(*, cluster: bool = False) -> Iterator[RealApiServer | None]:
    """The real kube-apiserver (with ``cluster``: also the controller manager, the scheduler
    and a hollow node, as ``refk8s.sh up DIR --cluster``), or None without the binaries."""
    try:
        binaries = find_binaries(ROOT)
    except BinariesNotFound as exc:
        print(f"skipped: no real kube-apiserver here ({exc})")
        yield None
        return
    with (
        tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp,
        RealApiServer(binaries, pathlib.Path(tmp), cluster=cluster) as server,
    ):
        yield server
