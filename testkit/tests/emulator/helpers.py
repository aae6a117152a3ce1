"""Helpers for the emulator tests."""

from __future__ import annotations

import json
from typing import Any

import urllib3
from kubernetes.client import ApiException

from kubecoord_testkit.emulator import ApiEmulator


def status_of(error: ApiException) -> dict[str, Any]:
    """The v1 Status body of a failed call."""
    body: dict[str, Any] = json.loads(error.body)
    return body


def lease(name: str, holder: str = "a", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "labels": labels},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
    }


def first_event(response: Any) -> dict[str, Any]:
    """The first line of a raw (``_preload_content=False``) watch response, then close it:
    a half-read stream must not go back to the connection pool."""
    line = response.readline()
    response.close()
    response.release_conn()
    event: dict[str, Any] = json.loads(line)
    return event


def request(
    api: ApiEmulator,
    method: str,
    path: str,
    body: object = None,
    content_type: str = "application/json",
    *,
    token: str | None = None,
) -> tuple[int, Any]:
    """A raw HTTP request to the emulator: (status, decoded JSON body or text)."""
    headers = {"Content-Type": content_type}
    if token != "":
        headers["Authorization"] = f"Bearer {token or api.admin_token}"
    data = body if isinstance(body, str) or body is None else json.dumps(body)
    response = urllib3.request(method, api.url + path, body=data, headers=headers, timeout=30)
    try:
        return response.status, json.loads(response.data)
    except ValueError:
        return response.status, response.data.decode()
