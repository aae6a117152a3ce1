"""The soak command's arguments: --backend-duration is checked before anything starts."""

from __future__ import annotations

import argparse
import pathlib

import pytest

from kubecoord.cli.exits import UsageError
from kubecoord_testkit.soak import cli


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(["--backend", "zookeeper,etcd", "--out", "/nonexistent", *argv])


@pytest.mark.parametrize("item", ["etcd", "etcd=0", "etcd=soon", "cassandra=5", "=5"])
def test_a_bad_backend_duration_is_refused_before_anything_starts(item: str) -> None:
    with pytest.raises(UsageError, match="--backend-duration"):
        cli.run(_args("--backend-duration", item))
    assert not pathlib.Path("/nonexistent").exists()


def test_backend_durations_parse() -> None:
    args = _args("--duration", "60", "--backend-duration", "etcd=1")
    assert args.duration == 60.0 and args.backend_duration == ["etcd=1"]
