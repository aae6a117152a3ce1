"""Listeners across a watch whose connection is cut: resumed at the last revision seen, with
no change lost or heard twice; and across a compaction past that revision (the range is
read again). Judged by etcd: what the listeners last heard equals what etcd holds."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

import kubecoord
from kubecoord_testkit.faults import ThreadedFaultProxy
from kubecoord_testkit.servers.etcd import EtcdCluster

from .conftest import eventually
from .etcdctl import etcdctl, revision
from .timings import TIMINGS


class Heard:
    """Every value a listener was called with, in order."""

    def __init__(self) -> None:
        self.values: list[object] = []
        self._lock = threading.Lock()

    def __call__(self, value: object) -> None:
        with self._lock:
            self.values.append(value)

    def last(self) -> object:
        with self._lock:
            return self.values[-1] if self.values else "nothing"


@pytest.mark.parametrize("compact", [False, True])
def test_listeners_resume_after_a_cut_watch_without_losing_or_repeating(
    etcd_server: EtcdCluster, proxies: list[ThreadedFaultProxy], compact: bool
) -> None:
    prefix = f"w-{uuid.uuid4().hex[:8]}"
    proxy = proxies[0]
    watcher = kubecoord.connect(f"etcd://{proxy.address}/{prefix}", **TIMINGS)
    writer = kubecoord.connect(f"etcd://{etcd_server.hosts}/{prefix}", **TIMINGS)
    store = writer.storage("s")
    store.put("k", "0")
    store.put("gone", "x")
    registry = watcher.listener_registry("s")
    value, names = Heard(), Heard()
    registry.add_value_change_listener("k", value)
    registry.add_key_set_change_listener("", names)
    store.update("k", "1")
    eventually(lambda: value.last() == "1", "the listener never heard 1")
    proxy.refuse()  # the watch cannot come back ...
    proxy.cut()  # ... once its connection is reset
    for n in range(2, 7):
        store.update("k", str(n))
    store.delete("gone")
    store.put("new", "y")
    if compact:
        etcdctl(etcd_server, "compact", str(revision(etcd_server)))
    time.sleep(0.5)  # the watch tries, and is refused, meanwhile
    proxy.heal()
    eventually(lambda: value.last() == "6" and names.last() == {"k", "new"}, f"heard {value.values} {names.values}")
    time.sleep(1.0)  # nothing more arrives
    heard = [str(v) for v in value.values]
    assert heard[0] == "1", heard  # the first change after the listener was added (0 was no change)
    assert heard == sorted(heard, key=int) and len(set(heard)) == len(heard), heard  # in order, none twice
    assert heard[-1] == store.fetch("k").result()
    if compact:
        assert heard == ["1", "6"], heard  # the history between was compacted: the range read again
    sets = [frozenset(v) for v in names.values if isinstance(v, set)]
    assert sets == [frozenset({"k", "new"})], names.values  # one change of the key set: heard once
    watcher.close()
    writer.close()
