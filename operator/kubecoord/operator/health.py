"""The /healthz and /readyz endpoints the Deployment's probes call (default :8080).

They answer on every replica — the active one and the standbys — because a standby that is
waiting for the operator Lease is healthy, not dead; the body says which role it has.
kopf's own liveness endpoint exists only while kopf runs, i.e. on the active replica, so
it cannot serve the standbys' probes.

Both answer the same JSON body: ``role`` (starting, standby, leader), ``ok`` (this replica
can do its work), ``live`` and, when not ok, ``problem`` in one line. They differ in their
status code:

- /healthz (liveness): 503 once the replica is shutting down, and on the active replica
  when kopf's event loop has not ticked for STALL_SECONDS (a handler that blocks the loop,
  a deadlock): kopf is stuck, and the kubelet's liveness probe restarts the pod, whose
  standby takes over. The tick is a task on kopf's own loop (kubecoord.operator.ha), so it
  stops exactly when the loop stops making progress. Else 200 — also with ``ok: false``:
  a restart cures neither an RBAC refusal nor an unreachable API server.
- /readyz (readiness): 503 whenever ``ok`` is false: the problems above, and an access
  problem (kubecoord.operator.access: the API server refuses the reads the operator's
  watches need, or cannot be reached). The pod then shows not Ready, and
  ``helm install --wait`` or a rollout waits on it.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STALL_SECONDS = 30.0
"""Longer than any handler may block kopf's loop; shorter than the probe's failure budget
(3 x 10 s in the chart) plus a restart."""


class HealthState:
    def __init__(self, *, stall_seconds: float = STALL_SECONDS) -> None:
        self.role = "starting"
        self.stopping = False
        self.stall_seconds = stall_seconds
        self.last_beat: float | None = None
        """monotonic time of kopf's loop's last tick (None: kopf not running here)."""
        self.access_problem: str | None = None
        """Why the API server does not let this replica work (kubecoord.operator.access), or None."""

    def beat(self) -> None:
        self.last_beat = time.monotonic()

    def problem(self) -> str | None:
        """Why this replica cannot do its work, or None: not live, or an access problem."""
        return self.liveness_problem() or self.access_problem

    def liveness_problem(self) -> str | None:
        """Why this replica should be restarted, or None."""
        if self.stopping:
            return "stopping"
        if self.role == "leader" and self.last_beat is not None:
            silent = time.monotonic() - self.last_beat
            if silent > self.stall_seconds:
                return f"kopf's event loop has not ticked for {silent:.0f} s"
        return None


class _Handler(BaseHTTPRequestHandler):
    state: HealthState

    def do_GET(self) -> None:
        if self.path.split("?")[0] not in ("/healthz", "/readyz"):
            self.send_error(404)
            return
        problem = self.state.problem()
        live = self.state.liveness_problem() is None
        ready = problem is None
        code = 200 if (live if self.path.split("?")[0] == "/healthz" else ready) else 503
        answer: dict[str, object] = {"role": self.state.role, "ok": ready, "live": live}
        if problem:
            answer["problem"] = problem
        body = json.dumps(answer).encode()
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
