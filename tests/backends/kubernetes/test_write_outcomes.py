"""A KV write whose answer is lost after the API server applied it (the fault proxy holds
the server's answer, then cuts the connection) is reported as applied or as
OutcomeUnknownError — never as refused (KeyExistsError, VersionConflictError,
KeyNotFoundError), and never applied twice. Checked against another client's server read,
on the emulator and on the real kube-apiserver."""

from __future__ import annotations

import pathlib
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

import kubecoord
from kubecoord import (
    KeyExistsError,
    KeyNotFoundError,
    OutcomeUnknownError,
    Storage,
    VersionConflictError,
    Versioned,
)
from kubecoord_testkit.faults import ThreadedFaultProxy
from tests.helpers import eventually

from .clusters import Cluster

OPTIONS: dict[str, Any] = {"request_timeout": 30.0}
"""Generous: the held write must not time out before the test cuts its connection."""

Write = Callable[[Storage], Any]
CASES: dict[str, tuple[bool, Write, Versioned | None, Any]] = {
    # name: (k0 exists first at v0 version 1, the write, k0 once applied, what the write returns)
    "put": (False, lambda kv: kv.put("k0", "v1"), Versioned("v1", 1), 1),
    "conditional update": (True, lambda kv: kv.update("k0", "v1", expected_version=1), Versioned("v1", 2), 2),
    "blind update": (True, lambda kv: kv.update("k0", "v1"), Versioned("v1", 2), 2),
    "conditional delete": (True, lambda kv: kv.delete("k0", expected_version=1), None, None),
    "blind delete": (True, lambda kv: kv.delete("k0"), None, None),
}


def server_read(kv: Storage, key: str) -> Versioned | None:
    """What the API server holds now (a GET, not the watch cache)."""
    return kv.fetch_confirmed(key, max_age=0.001)[0]


@pytest.fixture
def proxied(cluster: Cluster, tmp_path: pathlib.Path) -> Iterator[tuple[ThreadedFaultProxy, str]]:
    """A fault proxy in front of the cluster's API server, and a kubeconfig that goes through it."""
    document = yaml.safe_load(cluster.admin_kubeconfig.read_text())
    scheme, _, address = document["clusters"][0]["cluster"]["server"].partition("://")
    host, _, port = address.rstrip("/").rpartition(":")
    with ThreadedFaultProxy((host, int(port))) as proxy:
        document["clusters"][0]["cluster"]["server"] = f"{scheme}://{proxy.address}"
        path = tmp_path / "proxied.kubeconfig"
        path.write_text(yaml.safe_dump(document))
        yield proxy, str(path)


@pytest.mark.parametrize("case", list(CASES))
def test_a_write_applied_before_its_answer_was_cut_is_reported_applied(
    cluster: Cluster, proxied: tuple[ThreadedFaultProxy, str], case: str
) -> None:
    exists, write, applied, returns = CASES[case]
    proxy, proxied_config = proxied
    store = f"cut-{uuid.uuid4().hex[:8]}"
    with kubecoord.connect(cluster.url, kubeconfig=str(cluster.admin_kubeconfig), **OPTIONS) as direct, \
            kubecoord.connect(cluster.url, kubeconfig=proxied_config, **OPTIONS) as cut:
        observer, kv = direct.storage(store), cut.storage(store)
        observer.put("other", "x")  # the shard exists: the write is a PUT on its resourceVersion
        if exists:
            observer.put("k0", "v0")
        before = Versioned("v0", 1) if exists else None
        eventually(lambda: kv.fetch_versioned("other").result() is not None
                   and kv.fetch_versioned("k0").result() == before, 30)
        outcome: list[Any] = []

        def run() -> None:
            try:
                outcome.append(write(kv))
            except Exception as exc:
                outcome.append(exc)

        proxy.hold("down")  # the request reaches the server; its answer waits in the proxy
        thread = threading.Thread(target=run, name="cut-write", daemon=True)
        thread.start()
        eventually(lambda: server_read(observer, "k0") == applied, 30)  # the server applied it
        assert proxy.cut() >= 1
        proxy.release()
        thread.join(60)
        assert not thread.is_alive(), "the write never returned"
        [result] = outcome
        # Never a definite "not applied" for a write the server applied ...
        assert not isinstance(result, (KeyExistsError, KeyNotFoundError, VersionConflictError)), repr(result)
        # ... resolved here by reading the shard back (nobody else wrote it meanwhile) ...
        assert not isinstance(result, Exception), repr(result)
        assert result == returns
        # ... and applied once: a second application would show another version (or a refusal).
        assert server_read(observer, "k0") == applied
        assert server_read(observer, "other") == Versioned("x", 1)
        assert kv.fetch_versioned("k0").result() == applied  # the writer's own cache agrees


def test_a_write_whose_shard_was_written_by_another_client_meanwhile_is_unknown(
    cluster: Cluster, proxied: tuple[ThreadedFaultProxy, str]
) -> None:
    """The answer lost, and another client wrote the shard (another key) before the writer
    could read it back: whether the write was applied cannot be told from the shard, so the
    writer says so (its marker is gone with the other client's write)."""
    proxy, proxied_config = proxied
    store = f"cut-{uuid.uuid4().hex[:8]}"
    with kubecoord.connect(cluster.url, kubeconfig=str(cluster.admin_kubeconfig), **OPTIONS) as direct, \
            kubecoord.connect(cluster.url, kubeconfig=proxied_config, **OPTIONS) as cut:
        observer, kv = direct.storage(store), cut.storage(store)
        observer.put("other", "x")
        observer.put("k0", "v0")
        eventually(lambda: kv.fetch_versioned("k0").result() == Versioned("v0", 1), 30)
        outcome: list[Any] = []

        def run() -> None:
            try:
                outcome.append(kv.update("k0", "v1", expected_version=1))
            except Exception as exc:
                outcome.append(exc)

        proxy.hold("down")
        thread = threading.Thread(target=run, name="cut-write", daemon=True)
        thread.start()
        eventually(lambda: server_read(observer, "k0") == Versioned("v1", 2), 30)
        observer.update("other", "y")  # same shard, another key, before the writer reads back
        proxy.cut()
        proxy.release()
        thread.join(60)
        assert not thread.is_alive(), "the write never returned"
        [result] = outcome
        assert isinstance(result, OutcomeUnknownError), repr(result)
        assert isinstance(result, kubecoord.BackendUnavailableError)  # handlers of unreachable still catch it
        assert server_read(observer, "k0") == Versioned("v1", 2)  # applied once, as the server says
