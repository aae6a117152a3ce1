"""close() leaves no watch thread behind: a short-lived process (the kubecoord command)
must not exit while a daemon thread is inside the HTTP client, which can abort it."""

from __future__ import annotations

import threading

from .conftest import Connect


def test_no_watch_thread_outlives_close(connect: Connect, name: str) -> None:
    for _ in range(5):
        coordinator = connect()
        coordinator.storage(name).fetch_versioned("k").result(10)
        coordinator.leader_election(name).get_leader()
        coordinator.group_membership(name).membership()
        coordinator.close()
        alive = [t.name for t in threading.enumerate() if t.name.startswith("kubecoord-watch") and t.is_alive()]
        assert alive == []
