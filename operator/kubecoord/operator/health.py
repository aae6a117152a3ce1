"""The /healthz endpoint the Deployment's probes call (default :8080).

It answers on every replica — the active one and the standbys — because a standby that is
waiting for the operator Lease is healthy, not dead; the body says which role it has.
kopf's own liveness endpoint exists only while kopf runs, i.e. on the active replica, so
it cannot serve the standbys' probes.

Guarantee: 200 while the replica's main loop is running, 503 once it is shutting down.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class HealthState:
    def __init__(self) -> None:
        self.role = "starting"
        self.stopping = False


class _Handler(BaseHTTPRequestHandler):
    state: HealthState

    def do_GET(self) -> None:
        if self.path.split("?")[0] not in ("/healthz", "/readyz"):
            self.send_error(404)
            return
        code = 503 if self.state.stopping else 200
        body = json.dumps({"role": self.state.role, "ok": code == 200}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # probes every few seconds: no access log
        pass


def serve(state: HealthState, host: str, port: int) -> ThreadingHTTPServer:
    """Start the endpoint in a daemon thread; ``server.server_address`` has the bound port."""
    handler = type("HealthHandler", (_Handler,), {"state": state})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="kubecoord-health", daemon=True).start()
    return server
