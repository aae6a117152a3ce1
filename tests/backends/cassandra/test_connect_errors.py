"""connect() to cassandra:// that fails before any connection is made: a kubecoord error (no
server needed). The ssl module's own FileNotFoundError and SSLError, and the driver's
UnresolvableContactPoints, came out of connect() untranslated."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

import kubecoord
from kubecoord import BackendUnavailableError, InvalidArgumentError


@pytest.mark.parametrize(
    "ssl",
    [
        {"ca_file": "/nonexistent/ca.crt"},
        {"ca_file": "NOT-A-CERTIFICATE"},
        {"certfile": "/nonexistent/client.crt"},
    ],
)
def test_unusable_tls_files_are_an_invalid_argument(tmp_path: pathlib.Path, ssl: dict[str, Any]) -> None:
    not_a_certificate = tmp_path / "not-a-certificate.pem"
    not_a_certificate.write_text("hello\n")
    ssl = {key: str(not_a_certificate) if value == "NOT-A-CERTIFICATE" else value for key, value in ssl.items()}
    with pytest.raises(InvalidArgumentError, match="ssl"):
        kubecoord.connect("cassandra://127.0.0.1:1/kubecoord_test", ssl=ssl, connect_timeout=1)


def test_contact_points_that_do_not_resolve_are_backend_unavailable() -> None:
    with pytest.raises(BackendUnavailableError, match="resolved"):
        kubecoord.connect("cassandra://nonexistent.invalid/kubecoord_test", connect_timeout=1)
