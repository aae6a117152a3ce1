"""kubecoord group describe: what the group coordinator published, read without joining."""

from __future__ import annotations

import kubecoord
from kubecoord.cli import exits
from kubecoord.group_coordinator import UnitsProtocol
from tests.helpers import eventually

from .conftest import Cli

UNITS = [f"p{i}" for i in range(6)]


def test_describe_a_stable_generation(zk_cli: Cli, zk_url: str) -> None:
    missing = zk_cli("group", "describe", "workers")
    assert missing.returncode == exits.NOT_FOUND and "no coordinator state" in missing.stderr
    with kubecoord.connect(zk_url) as one, kubecoord.connect(zk_url) as two:
        first = one.group_coordinator("workers", UnitsProtocol(UNITS), member_id="w1", session_timeout=6.0)
        second = two.group_coordinator("workers", UnitsProtocol(UNITS), member_id="w2", session_timeout=6.0)
        first.join(timeout=60)
        second.join(timeout=60)
        eventually(
            lambda: first.is_stable() and second.is_stable() and first.generation == second.generation, timeout=60
        )
        generation = first.generation
        document = zk_cli.json("group", "describe", "workers")
        assert document["generation"] == generation and document["phase"] == "stable"
        assert document["protocol_type"] == "units"
        assert document["leader"] in ("w1", "w2") and document["elected"] == document["leader"]
        assert [m["id"] for m in document["members"]] == ["w1", "w2"]
        assert all(m["in_generation"] and m["live"] for m in document["members"])
        held = sorted(unit for m in document["members"] for unit in m["assignment"])
        assert held == sorted(UNITS)
        table = zk_cli("group", "describe", "workers").stdout.splitlines()
        assert table[0].split() == ["GROUP", "GENERATION", "PHASE", "PROTOCOL", "LEADER", "EPOCH"]
        assert table[1].split()[:3] == ["workers", str(generation), "stable"]
        assert table[3].split() == ["MEMBER", "IN-GENERATION", "LIVE", "ASSIGNMENT"]
        assert {line.split()[0] for line in table[4:6]} == {"w1", "w2"}
