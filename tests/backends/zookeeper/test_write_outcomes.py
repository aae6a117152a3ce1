"""A KV write whose answer is lost after ZooKeeper applied it (the fault proxy holds the
server's answer, then cuts the connection) is reported as OutcomeUnknownError or as
applied — never as refused (KeyExistsError, VersionConflictError, KeyNotFoundError) nor as
a plain BackendUnavailableError (which means nothing was written), and never applied
twice. Checked against another client's read of the server."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

import kubecoord
from kubecoord import BackendUnavailableError, OutcomeUnknownError, Storage, Versioned
from kubecoord_testkit.faults import ThreadedFaultProxy
from kubecoord_testkit.servers.zookeeper import ZooKeeperServer
from tests.helpers import eventually

OPTIONS: dict[str, Any] = {"lease_duration": 10.0, "request_timeout": 30.0}

Write = Callable[[Storage], Any]
CASES: dict[str, tuple[bool, Write, int, Versioned | None, Any]] = {
    # name: (k0 exists first at v0 version 1, the write, its requests (the last one writes),
    #        k0 once applied, what the write returns)
    "put": (False, lambda kv: kv.put("k0", "v1"), 1, Versioned("v1", 1), 1),
    "conditional update": (True, lambda kv: kv.update("k0", "v1", expected_version=1), 2, Versioned("v1", 2), 2),
    "blind update": (True, lambda kv: kv.update("k0", "v1"), 2, Versioned("v1", 2), 2),
    "conditional delete": (True, lambda kv: kv.delete("k0", expected_version=1), 2, None, None),
    "blind delete": (True, lambda kv: kv.delete("k0"), 2, None, None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_write_applied_before_its_answer_was_cut_is_never_reported_refused(
    zookeeper_server: ZooKeeperServer, case: str
) -> None:
    exists, write, requests, applied, returns = CASES[case]
    chroot = f"cut-{uuid.uuid4().hex[:8]}"
    with ThreadedFaultProxy(("127.0.0.1", zookeeper_server.servers[0].client_port)) as proxy, \
            kubecoord.connect(f"zookeeper://{zookeeper_server.hosts}/{chroot}", **OPTIONS) as direct, \
            kubecoord.connect(f"zookeeper://{proxy.address}/{chroot}", **OPTIONS) as cut:
        observer, kv = direct.storage("s"), cut.storage("s")
        observer.put("other", "x")  # the store's znode exists: a put is one create (its answer held)
        if exists:
            observer.put("k0", "v0")
        assert kv.fetch_versioned("k0").result(30) == (Versioned("v0", 1) if exists else None)
        outcome: list[Any] = []

        def run() -> None:
            try:
                outcome.append(write(kv))
            except Exception as exc:
                outcome.append(exc)

        # The write's request reaches the server; its answer (and what follows) waits in the proxy.
        proxy.hold("down", after=requests)
        thread = threading.Thread(target=run, name="cut-write", daemon=True)
        thread.start()
        eventually(lambda: observer.fetch_versioned("k0").result(30) == applied, 30)  # the server applied it
        proxy.cut()
        proxy.release()
        thread.join(60)
        assert not thread.is_alive(), "the write never returned"
        [result] = outcome
        if isinstance(result, Exception):
            # Unknown, not refused, and not the plain "unavailable" that means nothing was written.
            assert isinstance(result, OutcomeUnknownError), repr(result)
            assert isinstance(result, BackendUnavailableError)
        else:
            assert result == returns
        assert observer.fetch_versioned("k0").result(30) == applied  # applied once
        eventually(lambda: _readable(kv), 30)  # the cut client reconnects and sees the same
        assert kv.fetch_versioned("k0").result(30) == applied


def _readable(kv: Storage) -> bool:
    try:
        kv.fetch_versioned("k0").result(30)
    except kubecoord.BackendUnavailableError:
        return False
    return True
