"""/healthz of an operator replica: 503 once kopf's loop stops ticking on the active replica."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from kubecoord.operator.health import HealthState, serve


def _get(port: int) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def test_a_leader_whose_kopf_loop_stopped_ticking_is_unhealthy() -> None:
    state = HealthState(stall_seconds=1.0)
    server = serve(state, "127.0.0.1", 0)
    port = server.server_address[1]
    try:
        state.role = "standby"
        assert _get(port)[0] == 200  # a standby has no kopf loop: healthy
        state.role = "leader"
        state.beat()
        assert _get(port) == (200, {"role": "leader", "ok": True})
        state.last_beat = time.monotonic() - 5  # kopf's loop blocked for 5 s
        code, body = _get(port)
        assert code == 503 and body["ok"] is False and "not ticked" in str(body["problem"])
        state.beat()
        assert _get(port)[0] == 200
        state.stopping = True
        assert _get(port)[0] == 503
    finally:
        server.shutdown()
