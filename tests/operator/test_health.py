"""/healthz and /readyz of an operator replica: /healthz 503 once kopf's loop stops ticking on
the active replica; /readyz 503 also while the API server refuses or cannot be reached."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from kubecoord.operator.health import HealthState, serve


def _get(port: int, path: str = "/healthz") -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
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
        assert _get(port) == (200, {"role": "leader", "ok": True, "live": True})
        state.last_beat = time.monotonic() - 5  # kopf's loop blocked for 5 s
        code, body = _get(port)
        assert code == 503 and body["ok"] is False and "not ticked" in str(body["problem"])
        state.beat()
        assert _get(port)[0] == 200
        state.stopping = True
        assert _get(port)[0] == 503
    finally:
        server.shutdown()


def test_an_access_problem_is_not_ready_but_live() -> None:
    state = HealthState()
    server = serve(state, "127.0.0.1", 0)
    port = server.server_address[1]
    try:
        state.role = "standby"
        state.access_problem = "refused by the API server (RBAC): GET /apis/...: HTTP 403 Forbidden"
        code, body = _get(port, "/readyz")
        assert code == 503 and body == {"role": "standby", "ok": False, "live": True,
                                        "problem": state.access_problem}
        assert _get(port, "/healthz") == (200, body)  # a restart cures no RBAC refusal
        state.access_problem = None
        assert _get(port, "/readyz") == (200, {"role": "standby", "ok": True, "live": True})
        state.stopping = True
        assert _get(port, "/readyz")[0] == 503 and _get(port, "/healthz")[0] == 503
    finally:
        server.shutdown()


def test_the_access_check_names_a_refusal_and_an_unreachable_server() -> None:
    from kubecoord.operator import access
    from kubecoord.operator.kubeapi import ApiException

    paths = access.probes(("apps",), clusterwide=False)
    assert paths[0].startswith("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
    assert "/api/v1/namespaces?limit=1" in paths
    assert "/apis/kubecoord.dev/v1alpha1/namespaces/apps/groups?limit=1" in paths
    assert "/api/v1/namespaces?limit=1" not in access.probes((), clusterwide=True)

    def refusing(path: str) -> object:
        raise ApiException(status=403, reason="Forbidden")

    def unreachable(path: str) -> object:
        raise ConnectionRefusedError(111, "Connection refused")

    assert str(access.check(paths, refusing)).startswith("refused by the API server (RBAC)")
    assert "unreachable" in str(access.check(paths, unreachable))
    assert access.check(paths, lambda path: {}) is None
