"""An API error the operator logs is one line: what was asked and what the API said,
never the response headers (the kubernetes client's own message dumps them)."""

from __future__ import annotations

import json

from kubecoord.operator.kubeapi import ApiException, RequestFailed


class _Response:
    def __init__(self, status: int, reason: str, body: dict[str, object] | bytes) -> None:
        self.status, self.reason = status, reason
        self.data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.headers = {"Audit-Id": "0f1e", "X-Kubernetes-Pf-Flowschema-Uid": "secret-ish"}

    def getheaders(self) -> dict[str, str]:
        return self.headers


def test_a_403_names_verb_path_and_the_apis_message_without_headers() -> None:
    message = ('leases.coordination.k8s.io "billing" is forbidden: User "system:serviceaccount:ops:kc" cannot '
               'update resource "leases" in API group "coordination.k8s.io" in the namespace "apps"')
    error = RequestFailed("PUT", "/apis/coordination.k8s.io/v1/namespaces/apps/leases/billing",
                          _Response(403, "Forbidden", {"kind": "Status", "message": message, "code": 403}))
    assert isinstance(error, ApiException) and error.status == 403  # callers' except clauses still match
    text = str(error)
    assert text == f"PUT /apis/coordination.k8s.io/v1/namespaces/apps/leases/billing: HTTP 403 Forbidden: {message}"
    assert "Audit-Id" not in text and "\n" not in text


def test_a_body_that_is_not_json_is_cut_short() -> None:
    error = RequestFailed("GET", "/api/v1/namespaces", _Response(502, "Bad Gateway", b"<html>" + b"x" * 1000))
    text = str(error)
    assert text.startswith("GET /api/v1/namespaces: HTTP 502 Bad Gateway: <html>") and len(text) < 400
