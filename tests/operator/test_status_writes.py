"""Status writes the API refuses (422, 413, 429, 5xx) are retried with backoff and never
stop the resource's status work (kubecoord.operator.controller.status_writer, StatusWriter): faults injected on the
emulator (ApiEmulator.fail). The size side — a Group too large to list whole in its
status — runs on the real server (tests/real/test_install.py), whose object size limit is
the one that matters."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import REGISTRY

from kubecoord.api import Coordinator
from kubecoord_testkit.emulator import ApiEmulator
from tests.helpers import eventually
from tests.operator.conftest import Resources


def _status_errors() -> float:
    return REGISTRY.get_sample_value("kubecoord_operator_errors_total", {"kind": "Group", "stage": "status"}) or 0.0


CODES = (422, 413, 429, 503)


def test_refused_status_writes_are_retried_and_the_controller_goes_on(
    resources: Resources, client: Coordinator, api: ApiEmulator, unique: str, caplog: pytest.LogCaptureFixture,
) -> None:
    name = f"refused-{unique}"
    resources.create("groups", "Group", name, {"leaseDurationSeconds": 3, "renewIntervalSeconds": 0.5})
    resources.wait_ready("groups", name)
    before = _status_errors()
    caplog.set_level(logging.INFO)
    for code in CODES:  # used in this order, one refusal each
        api.fail("patch", "groups", subresource="status", code=code)
    group = client.group_membership(name)
    group.join("w1", data="a")
    # Four refusals (backoff 0.5 s, 1 s, 2 s, 5 s), then the write lands.
    eventually(lambda: resources.status("groups", name).get("memberCount") == 1, timeout=40, interval=0.2)
    assert api.pending_faults() == 0
    assert _status_errors() - before >= len(CODES)
    failed = [getattr(r, "status_code", None) for r in caplog.records
              if r.getMessage() == "status write failed; will retry"]
    assert [code for code in failed if code in CODES] == list(CODES), failed
    # The controller goes on mirroring: later changes reach the status too.
    group.join("w2", data="b")
    eventually(lambda: resources.status("groups", name).get("memberCount") == 2, timeout=20, interval=0.2)
    # A reconcile that raised would be logged with its traceback: none did.
    crashed = [r.getMessage()[:200] for r in caplog.records if r.getMessage() == "status reconcile failed"]
    assert crashed == []
    group.leave("w1")
    group.leave("w2")
    resources.delete("groups", name)
