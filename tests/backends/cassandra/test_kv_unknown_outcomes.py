"""A KV write whose LWT has an unknown outcome (Cassandra's CAS write timeout, which Paxos
contention between writers of one store gives) and which a SERIAL read shows did not
land is answered by what the key holds, never as KeyNotFoundError for a key that exists.

Found by the robustness tier (Porcupine): ``update(k0, expected_version=3)`` answered
KeyNotFoundError while another client's update took k0 from version 3 to 4; the write had
timed out, the SERIAL read said it had not landed, and the store read the missing answer
row as a missing key.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import cassandra
import pytest
from cassandra.policies import WriteType

import kubecoord
from kubecoord.api import Coordinator, Fence, Storage
from kubecoord.errors import FencedError, OutcomeUnknownError, VersionConflictError

from .timings import TIMINGS


class CasTimeout:
    """Wraps the driver session: the next LWT whose text starts with ``prefix`` times out,
    without reaching the server or after it applied it (``landed``), then ``meanwhile()``
    (another writer's change) runs before the caller hears of the timeout."""

    def __init__(
        self, driver_session: Any, prefix: str, meanwhile: Callable[[], object] = lambda: None, *, landed: bool = False,
    ) -> None:
        self._execute = driver_session.execute
        self._prefix = prefix
        self._meanwhile = meanwhile
        self._landed = landed
        self.left = 1

    def __call__(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        text = getattr(getattr(query, "prepared_statement", None), "query_string", "")
        if self.left and text.startswith(self._prefix) and " IF " in text:
            self.left -= 1
            if self._landed:
                self._execute(query, *args, **kwargs)
            self._meanwhile()
            raise cassandra.WriteTimeout("CAS operation timed out (injected)", write_type=WriteType.CAS)
        return self._execute(query, *args, **kwargs)


@pytest.fixture
def stores(cassandra_url: str) -> Iterator[tuple[Coordinator, Storage, Storage]]:
    with kubecoord.connect(cassandra_url, **TIMINGS) as coord, kubecoord.connect(cassandra_url, **TIMINGS) as other:
        name = f"outcomes-{uuid.uuid4().hex[:8]}"
        yield coord, coord.storage(name), other.storage(name)


def _time_out_next(
    coord: Coordinator, prefix: str, meanwhile: Callable[[], object] = lambda: None, *, landed: bool = False,
) -> CasTimeout:
    driver_session = coord.session.session  # type: ignore[attr-defined]
    fault = CasTimeout(driver_session, prefix, meanwhile, landed=landed)
    driver_session.execute = fault
    return fault


def test_a_conditional_update_that_lost_the_race_is_a_version_conflict(
    stores: tuple[Coordinator, Storage, Storage],
) -> None:
    coord, store, other = stores
    store.put("k", "a")
    fault = _time_out_next(coord, "UPDATE", lambda: other.update("k", "b", expected_version=1))
    with pytest.raises(VersionConflictError):
        store.update("k", "c", expected_version=1)
    assert fault.left == 0
    assert store.fetch_versioned("k").result(10) == kubecoord.Versioned("b", 2)


def test_an_update_that_did_not_land_is_written_again(stores: tuple[Coordinator, Storage, Storage]) -> None:
    coord, store, _ = stores
    store.put("k", "a")
    fault = _time_out_next(coord, "UPDATE")
    assert store.update("k", "b") == 2
    assert fault.left == 0
    assert store.update("k", "c", expected_version=2) == 3
    assert store.fetch_versioned("k").result(10) == kubecoord.Versioned("c", 3)


def test_a_delete_that_did_not_land_is_sent_again(stores: tuple[Coordinator, Storage, Storage]) -> None:
    coord, store, _ = stores
    store.put("k", "a")
    fault = _time_out_next(coord, "BEGIN BATCH")
    store.delete("k", expected_version=1)
    assert fault.left == 0
    assert store.fetch_versioned("k").result(10) is None


def test_a_delete_that_landed_unanswered_succeeds(stores: tuple[Coordinator, Storage, Storage]) -> None:
    coord, store, _ = stores
    store.put("k", "a")
    fault = _time_out_next(coord, "BEGIN BATCH", landed=True)
    store.delete("k")
    assert fault.left == 0
    assert store.fetch_versioned("k").result(10) is None


@pytest.mark.parametrize("expected_version", [None, 1], ids=["plain", "conditional"])
def test_a_delete_that_landed_before_another_client_created_the_key_again_is_unknown(
    stores: tuple[Coordinator, Storage, Storage], expected_version: int | None,
) -> None:
    """Ours removed version 1 unanswered; another client put the key again (version 1 once
    more, its own write). Taking "still at version 1" for "ours did not land" deleted their
    key: unknown, and theirs is left alone."""
    coord, store, other = stores
    store.put("k", "a")
    _time_out_next(coord, "BEGIN BATCH", lambda: other.put("k", "b"), landed=True)
    with pytest.raises(OutcomeUnknownError):
        store.delete("k", expected_version=expected_version)
    assert store.fetch_versioned("k").result(10) == kubecoord.Versioned("b", 1)


def test_a_fenced_delete_that_landed_before_another_client_created_the_key_again_is_unknown(
    stores: tuple[Coordinator, Storage, Storage],
) -> None:
    coord, store, other = stores
    fence = Fence("f", 1)
    store.put("k", "a", fence=fence)
    _time_out_next(coord, "BEGIN BATCH", lambda: other.put("k", "b", fence=fence), landed=True)
    with pytest.raises(OutcomeUnknownError):
        store.delete("k", fence=fence)
    assert store.fetch_versioned("k").result(10) == kubecoord.Versioned("b", 1)


@pytest.mark.parametrize("landed", [False, True], ids=["theirs-only", "ours-then-their-put-and-delete"])
def test_a_delete_whose_key_another_client_removed_meanwhile_is_unknown(
    stores: tuple[Coordinator, Storage, Storage], landed: bool,
) -> None:
    """Found by the robustness tier: two deletes of one key both answered success (a delete
    timed out, another client's delete removed the key, and the SERIAL read's "gone" was
    taken for ours). Whether ours or theirs removed it cannot be told: OutcomeUnknownError."""
    coord, store, other = stores
    store.put("k", "a")

    def theirs() -> None:
        if landed:  # ours removed version 1; they create it again and delete it
            other.put("k", "b")
        other.delete("k")

    _time_out_next(coord, "BEGIN BATCH", theirs, landed=landed)
    with pytest.raises(OutcomeUnknownError):
        store.delete("k")


def test_a_blind_update_that_landed_and_was_overwritten_is_unknown_not_sent_again(
    stores: tuple[Coordinator, Storage, Storage],
) -> None:
    """Ours took the key from version 1 to 2 unanswered, another client's update took it to
    3 before the SERIAL read: the read shows neither our nonce nor the one we wrote over, so
    whether ours landed cannot be told from it. Sent again, it was applied twice."""
    coord, store, other = stores
    store.put("k", "a")
    _time_out_next(coord, "UPDATE", lambda: other.update("k", "theirs"), landed=True)
    with pytest.raises(OutcomeUnknownError):
        store.update("k", "ours")
    assert store.fetch_versioned("k").result(10) == kubecoord.Versioned("theirs", 3)


def test_a_fenced_update_that_landed_before_a_successor_wrote_is_unknown_not_fenced(
    stores: tuple[Coordinator, Storage, Storage],
) -> None:
    """A holder's fenced update lands unanswered; its successor (a higher token) writes
    before the SERIAL read. FencedError would say nothing was written: it was."""
    coord, store, other = stores
    store.put("k", "a", fence=Fence("job", 1))
    _time_out_next(coord, "UPDATE", lambda: other.update("k", "successor", fence=Fence("job", 2)), landed=True)
    with pytest.raises(OutcomeUnknownError):
        store.update("k", "first", fence=Fence("job", 1))
    assert store.fetch_versioned("k").result(10) == kubecoord.Versioned("successor", 3)


def test_a_fenced_put_that_landed_before_a_successor_wrote_is_unknown_not_fenced(
    stores: tuple[Coordinator, Storage, Storage],
) -> None:
    coord, store, other = stores
    store.put("other-key", "a", fence=Fence("job", 1))

    def successor() -> None:
        other.update("k", "successor", fence=Fence("job", 2))
        other.update("k", "successor again", fence=Fence("job", 2))

    _time_out_next(coord, "UPDATE", successor, landed=True)
    with pytest.raises(OutcomeUnknownError):
        store.put("k", "first", fence=Fence("job", 1))
    assert store.fetch_versioned("k").result(10) == kubecoord.Versioned("successor again", 3)


def test_a_fenced_update_that_did_not_land_before_a_successor_wrote_is_fenced(
    stores: tuple[Coordinator, Storage, Storage],
) -> None:
    """Not landed (the successor took the version ours was conditional on): FencedError is
    the truth — nothing of ours was written."""
    coord, store, other = stores
    store.put("k", "a", fence=Fence("job", 1))
    _time_out_next(coord, "UPDATE", lambda: other.update("k", "successor", fence=Fence("job", 2)))
    with pytest.raises(FencedError):
        store.update("k", "first", fence=Fence("job", 1))
    assert store.fetch_versioned("k").result(10) == kubecoord.Versioned("successor", 2)


def test_a_conditional_update_that_landed_and_was_written_over_meanwhile_is_unknown(
    stores: tuple[Coordinator, Storage, Storage],
) -> None:
    """Ours landed (version 2) unanswered, and another client wrote the key again (version 3)
    before the SERIAL read: taking the missing nonce for "did not land" answered an applied
    conditional update VersionConflictError. It cannot be told: OutcomeUnknownError."""
    coord, store, other = stores
    store.put("k", "a")
    fault = _time_out_next(coord, "UPDATE", lambda: other.update("k", "theirs"), landed=True)
    with pytest.raises(OutcomeUnknownError):
        store.update("k", "ours", expected_version=1)
    assert fault.left == 0
    assert store.fetch_versioned("k").result(10) == kubecoord.Versioned("theirs", 3)  # ours once, then theirs


def test_a_put_that_landed_and_was_written_over_meanwhile_is_unknown(
    stores: tuple[Coordinator, Storage, Storage],
) -> None:
    """Ours created the key unanswered and another client updated it before the SERIAL read:
    KeyExistsError would deny a put that took effect."""
    coord, store, other = stores
    store.put("other", "x")  # the store's incarnation exists: the put is one LWT
    fault = _time_out_next(coord, "UPDATE", lambda: other.update("k", "theirs"), landed=True)
    with pytest.raises(OutcomeUnknownError):
        store.put("k", "ours")
    assert fault.left == 0
    assert store.fetch_versioned("k").result(10) == kubecoord.Versioned("theirs", 2)


def test_a_put_that_lost_the_race_is_key_exists(stores: tuple[Coordinator, Storage, Storage]) -> None:
    """Ours did not land and another client's put took version 1: KeyExistsError, as answered."""
    coord, store, other = stores
    store.put("other", "x")
    fault = _time_out_next(coord, "UPDATE", lambda: other.put("k", "theirs"))
    with pytest.raises(kubecoord.KeyExistsError):
        store.put("k", "ours")
    assert fault.left == 0


def test_a_fenced_put_that_landed_before_a_successor_deleted_the_key_is_unknown_not_fenced(
    stores: tuple[Coordinator, Storage, Storage],
) -> None:
    """Ours put the key unanswered; the successor deleted it before the SERIAL read: the key
    is absent, as if ours had never landed, but the store changed since ours was sent."""
    coord, store, other = stores
    store.put("other-key", "a", fence=Fence("job", 1))
    _time_out_next(coord, "UPDATE", lambda: other.delete("k", fence=Fence("job", 2)), landed=True)
    with pytest.raises(OutcomeUnknownError):
        store.put("k", "first", fence=Fence("job", 1))
    assert store.fetch_versioned("k").result(10) is None


def test_a_fenced_put_that_did_not_land_is_sent_again(stores: tuple[Coordinator, Storage, Storage]) -> None:
    coord, store, _ = stores
    store.put("other-key", "a", fence=Fence("job", 1))
    fault = _time_out_next(coord, "UPDATE")
    assert store.put("k", "first", fence=Fence("job", 1)) == 1
    assert fault.left == 0
    assert store.fetch_versioned("k").result(10) == kubecoord.Versioned("first", 1)


def test_a_conditional_update_that_landed_before_the_key_was_created_again_is_unknown(
    stores: tuple[Coordinator, Storage, Storage],
) -> None:
    """Ours took version 1 to 2 unanswered; another client deleted the key, put it again and
    updated it (version 2 again, its own write, of another incarnation of the key: another
    ``created``). "Not applied" would be wrong: ours landed."""
    coord, store, other = stores
    store.put("k", "a")

    def theirs() -> None:
        other.delete("k")
        other.put("k", "x")
        other.update("k", "y")

    _time_out_next(coord, "UPDATE", theirs, landed=True)
    with pytest.raises(OutcomeUnknownError):
        store.update("k", "b", expected_version=1)
    assert store.fetch_versioned("k").result(10) == kubecoord.Versioned("y", 2)


def test_a_conditional_update_that_lost_the_race_after_the_key_was_created_again_is_a_version_conflict(
    stores: tuple[Coordinator, Storage, Storage],
) -> None:
    """The key was deleted and put again before ours was sent; ours, conditional on the new
    incarnation's version 1, did not land, and another client took version 2 of that same
    incarnation: VersionConflictError, as for a key never deleted."""
    coord, store, other = stores
    store.put("k", "a")
    other.delete("k")
    other.put("k", "x")
    fault = _time_out_next(coord, "UPDATE", lambda: other.update("k", "y"))
    with pytest.raises(VersionConflictError):
        store.update("k", "b", expected_version=1)
    assert fault.left == 0
    assert store.fetch_versioned("k").result(10) == kubecoord.Versioned("y", 2)
