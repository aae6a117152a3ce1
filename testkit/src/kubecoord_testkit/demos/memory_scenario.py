"""The in-process demo scenario (``kubecoord-testkit demo --url memory://demo``): three
candidates race for one election, the leader resigns and another takes over, a group
gains and loses members, and a KV write reaches value and key-set listeners (~1 s).
"""

from __future__ import annotations

import threading
import time

import kubecoord


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def scenario(url: str) -> int:
    coordinators = [kubecoord.connect(url) for _ in range(3)]
    observer = kubecoord.connect(url)
    try:
        _say(f"connected 3 candidates and an observer to {url}")
        changed = threading.Event()
        election = observer.leader_election("billing-controller")

        def on_leader(leader: str | None) -> None:
            _say(f"  listener: leader is now {leader}")
            changed.set()

        election.add_listener(on_leader)

        handles = [c.leader_election("billing-controller") for c in coordinators]
        for index, handle in enumerate(handles):
            won = handle.nominate(f"pod-{'abc'[index]}", data=f"host=10.0.0.{index + 1}")
            _say(f"pod-{'abc'[index]} nominated: {'leads' if won else 'follows'}")
        leader = election.get_leader()
        assert leader is not None
        _say(f"leader {leader.id} (data {leader.data!r}, epoch {leader.epoch})")

        changed.clear()
        _say(f"{leader.id} resigns")
        handles[0].resign(leader.id)
        changed.wait(5)
        successor = election.get_leader()
        assert successor is not None and successor.epoch > leader.epoch
        _say(f"leader {successor.id} took over (epoch {leader.epoch} -> {successor.epoch})")

        group = observer.group_membership("workers")
        group.add_listener(lambda members: _say(f"  listener: members {sorted(members)}"))
        workers = [c.group_membership("workers") for c in coordinators[:2]]
        workers[0].join("w1", data="host=10.0.0.7")
        workers[1].join("w2", data="host=10.0.0.8")
        workers[1].leave("w2")
        _say(f"group workers: {group.membership()}")

        registry = observer.listener_registry("topics")
        registry.add_value_change_listener("orders/config", lambda v: _say(f"  listener: orders/config = {v!r}"))
        registry.add_key_set_change_listener("", lambda names: _say(f"  listener: topics = {sorted(names)}"))
        store = coordinators[1].storage("topics")
        store.put("orders/config", "partitions=3")
        current = store.fetch_versioned("orders/config").result()
        assert current is not None
        version = store.update("orders/config", "partitions=6", expected_version=current.version)
        _say(f"orders/config updated to version {version}")
        try:
            store.update("orders/config", "partitions=9", expected_version=current.version)
        except kubecoord.VersionConflictError as exc:
            _say(f"a stale write was refused: {exc}")
        time.sleep(0.2)  # let the dispatcher print the last callbacks before we close
    finally:
        for coordinator in [*coordinators, observer]:
            coordinator.close()
    _say("closed every coordinator; demo done")
    return 0
