"""connect(): URL parsing and backend discovery through entry points."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import kubecoord
from kubecoord import InvalidArgumentError
from kubecoord.connect import parse_url


def test_parse_urls() -> None:
    url = parse_url("memory://shared")
    assert (url.scheme, url.location, url.path) == ("memory", "shared", "")
    assert parse_url("memory://").location == ""


@pytest.mark.parametrize("bad", ["", "memory", "nosuch://x", "memory:/x", "memory://x?opt=1", 42])
def test_bad_urls_name_the_installed_backends(bad: object) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        kubecoord.connect(bad)  # type: ignore[arg-type]
    if isinstance(bad, str) and "?" not in bad and bad:
        assert "memory" in str(err.value)


def test_unknown_options_are_rejected() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown options"):
        kubecoord.connect("memory://", no_such_option=1)


def test_a_third_party_backend_is_found_through_its_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A package installed elsewhere declares a backend; kubecoord itself is untouched.
    (tmp_path / "acme_backend.py").write_text(
        textwrap.dedent(
            """
            import kubecoord.backends.memory as memory

            def connect(url, *, history=None, **options):
                coordinator = memory.connect(url.__class__(url.raw, "memory", url.location, ""), history=history)
                coordinator.backend = "acme"
                return coordinator
            """
        )
    )
    dist = tmp_path / "acme_backend-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-backend\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[kubecoord.backends]\nacme = acme_backend:connect\n")
    monkeypatch.setattr(sys.modules["kubecoord.connect"], "_factories", {})  # acme's stays out of later tests
    with pytest.raises(InvalidArgumentError, match="unknown backend 'acme'"):
        kubecoord.connect("acme://x")
    monkeypatch.syspath_prepend(str(tmp_path))  # installed while the process runs
    assert "acme" in kubecoord.installed_backends()
    with kubecoord.connect("acme://x") as coord:
        assert coord.backend == "acme"
        assert coord.storage("s").put("k", "v") == 1
    sys.modules.pop("acme_backend", None)


def test_own_schemes_need_no_scan_of_the_installed_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scanning the entry points costs more than connecting to memory:// itself: kubecoord's
    own schemes are found without it, another one with one scan per process."""
    import importlib.metadata

    module = sys.modules["kubecoord.connect"]  # kubecoord.connect is the function

    scans: list[str] = []
    scan = importlib.metadata.entry_points

    def counted(*, group: str) -> importlib.metadata.EntryPoints:
        scans.append(group)
        return scan(group=group)

    monkeypatch.setattr(importlib.metadata, "entry_points", counted)
    monkeypatch.setattr(module, "_factories", {})
    for name in ("a", "b", "a"):
        with kubecoord.connect(f"memory://{name}") as coord:
            assert coord.backend == "memory"
    assert scans == []
    for _ in range(2):
        with pytest.raises(InvalidArgumentError, match="unknown backend 'nosuch'"):
            kubecoord.connect("nosuch://x")
    assert scans == [module.ENTRY_POINT_GROUP] * 2  # an unknown scheme is looked for again


def test_the_backend_folders_are_the_registered_entry_points() -> None:
    """pyproject.toml is the one registry of kubecoord's backends: every package under
    kubecoord/backends is an entry point ``SCHEME = kubecoord.backends.SCHEME:connect``, and
    every entry point of kubecoord's is such a package (connect() finds them by folder)."""
    import pkgutil
    import tomllib

    import kubecoord.backends

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    declared = pyproject["project"]["entry-points"]["kubecoord.backends"]
    folders = {info.name for info in pkgutil.iter_modules(kubecoord.backends.__path__) if info.ispkg}
    assert declared == {scheme: f"kubecoord.backends.{scheme}:connect" for scheme in folders}


def test_operator_module_is_not_shadowed() -> None:
    import operator

    assert operator.add(1, 2) == 3


def test_library_logging_is_silent_until_the_application_configures_it() -> None:
    """connect() gives the "kubecoord" logger its NullHandler (import kubecoord does not
    import logging at all): a warning from inside a connection is not printed by logging's
    last-resort handler in an application that configured no logging."""
    import subprocess

    probe = textwrap.dedent("""
        import sys
        import kubecoord
        assert "logging" not in sys.modules
        with kubecoord.connect("memory://"):
            import logging
            logging.getLogger("kubecoord.backends.memory").warning("should not be printed")
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "ok"
    assert "should not be printed" not in result.stderr, result.stderr
