"""kubecoord.cli.holding: a backend error while a hold ends, once CMD ran, is logged and
CMD's status stays the command's result; before CMD ran, the error is raised."""

from __future__ import annotations

import logging

import pytest

from kubecoord.cli.holding import Child, after_cmd_ran
from kubecoord.errors import BackendUnavailableError


def _child(status: int | None) -> Child:
    child = Child(["true"], 1.0, "job", "holder-1", lambda: None)
    child.status = status
    return child


def test_an_error_at_the_end_of_a_hold_after_cmd_ran_is_logged_with_the_hold(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kubecoord.cli"):
        after_cmd_ran(_child(143), BackendUnavailableError("session expired"))
    [record] = [r for r in caplog.records if r.name == "kubecoord.cli"]
    assert record.levelno == logging.WARNING
    assert (record.hold, record.holder) == ("job", "holder-1")  # type: ignore[attr-defined]
    assert record.error == "BackendUnavailableError: session expired"  # type: ignore[attr-defined]


@pytest.mark.parametrize("child", [None, _child(None)], ids=["no-child", "cmd-not-run"])
def test_an_error_before_cmd_ran_is_raised(child: Child | None) -> None:
    error = BackendUnavailableError("unreachable")
    with pytest.raises(BackendUnavailableError) as raised:
        after_cmd_ran(child, error)
    assert raised.value is error
