"""A KV write or server read judged while the shard's watch cache is behind the server in
a way a fresh GET cannot fix by itself: the watch has moved past the shard's version
without showing the shard (a BOOKMARK that came before the shard's ADDED event, as the
robustness tier saw from kube-apiserver in a whole cluster: an update answered
KeyNotFoundError 0.2 s after the key's put had returned). The cache then leaves the GET's
object out (it takes it for deleted since); the write and the read must go by the
server's answer all the same.

The emulator sends its events in order, so the test puts the cache in that state itself:
it stops the shard's watch (no ADDED will come) and hands the cache the bookmark ahead."""

from __future__ import annotations

import pytest

from kubecoord import KeyNotFoundError

from .conftest import Connect


def _watch_ahead(storage: object) -> None:
    """The reader's shard-0 informer: its watch stopped, its cache at a bookmark far ahead."""
    informer = storage._informer(0)  # type: ignore[attr-defined]
    informer.stop()
    informer._cache.watched("BOOKMARK", {"kind": "ConfigMap", "metadata": {"resourceVersion": "999999999"}},
                            selected=False)


def test_an_update_is_judged_on_the_server_answer_not_on_a_cache_past_the_shard(
    connect: Connect, name: str
) -> None:
    reader = connect().storage(name)
    with pytest.raises(KeyNotFoundError):
        reader.update("k", "early")  # the store does not exist yet; its shard's informer starts
    _watch_ahead(reader)
    writer = connect().storage(name)
    assert writer.put("k", "v1") == 1

    assert reader.update("k", "v2", expected_version=1) == 2
    assert writer.fetch_confirmed("k", max_age=0)[0].value == "v2"  # type: ignore[union-attr]


def test_a_server_read_answers_what_the_server_has(connect: Connect, name: str) -> None:
    reader = connect().storage(name)
    assert reader.fetch_confirmed("k", max_age=0)[0] is None
    _watch_ahead(reader)
    connect().storage(name).put("k", "v1")

    current, _ = reader.fetch_confirmed("k", max_age=0)
    assert current is not None and (current.value, current.version) == ("v1", 1)
