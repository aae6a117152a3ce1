"""Contract: fenced writes (Storage put/update/delete with ``fence=Fence(name, token)``), on
every backend.

The store keeps the highest token it accepted per fencing domain next to the data and
refuses a lower one with FencedError, nothing written; an equal token is accepted (the
same holder writes again), a higher one raises the mark. Each test's second writer is
another coordinator (as if another process); tests/contract/test_fenced_processes.py
runs the writers as real processes and freezes a holder past its lease.
"""

from __future__ import annotations

import threading
import time

import pytest

from kubecoord import Fence, FencedError, InvalidArgumentError, KeyNotFoundError, LeadingCallback, Storage, Versioned

from ..helpers import eventually
from .harness import Harness


def test_higher_and_equal_tokens_are_accepted_lower_refused_and_nothing_written(harness: Harness, name: str) -> None:
    old = harness.connect().storage(name)
    new = harness.connect().storage(name)
    assert old.put("k", "a1", fence=Fence("job", 5)) == 1
    assert old.update("k", "a2", fence=Fence("job", 5)) == 2  # the same holder again: equal token
    assert new.update("k", "b1", fence=Fence("job", 6)) == 3  # the next holder: higher token
    with pytest.raises(FencedError) as refused:
        old.update("k", "a3", fence=Fence("job", 5))
    assert (refused.value.name, refused.value.token, refused.value.accepted) == ("job", 5, 6)
    with pytest.raises(FencedError):
        old.delete("k", fence=Fence("job", 5))
    with pytest.raises(FencedError):
        old.put("other", "a", fence=Fence("job", 4))
    for reader in (old, new, harness.connect().storage(name)):
        def sees_b1(reader: Storage = reader) -> bool:
            return reader.fetch_versioned("k").result() == Versioned("b1", 3)

        eventually(sees_b1, timeout=harness.settle)
        assert reader.fetch("other").result() is None
    assert new.update("k", "b2", fence=Fence("job", 6)) == 4
    new.delete("k", fence=Fence("job", 7))
    assert new.fetch("k").result() is None


def test_a_refused_write_is_refused_before_the_key_is_judged(harness: Harness, name: str) -> None:
    """A stale holder gets FencedError whatever the key looks like (absent, another version)."""
    kv = harness.connect().storage(name)
    kv.put("k", "v", fence=Fence("job", 3))
    stale = harness.connect().storage(name)
    with pytest.raises(FencedError):
        stale.update("absent", "x", fence=Fence("job", 2))
    with pytest.raises(FencedError):
        stale.update("k", "x", expected_version=7, fence=Fence("job", 2))
    with pytest.raises(FencedError):
        stale.put("k", "x", fence=Fence("job", 2))
    with pytest.raises(KeyNotFoundError):  # a current token is judged on the key as usual
        stale.update("absent", "x", fence=Fence("job", 3))
    eventually(lambda: stale.fetch_versioned("k").result() == Versioned("v", 1), timeout=harness.settle)


def test_domains_are_independent_and_unfenced_writes_are_never_refused(harness: Harness, name: str) -> None:
    kv = harness.connect().storage(name)
    other = harness.connect().storage(name)
    kv.put("k", "v1", fence=Fence("job", 100))
    assert other.update("k", "v2", fence=Fence("other-job", 1)) == 2  # another domain's low token
    assert other.update("k", "v3") == 3  # no fence: the marks neither refuse nor change
    with pytest.raises(FencedError):
        other.update("k", "v4", fence=Fence("job", 99))
    assert kv.update("k", "v4", fence=Fence("job", 100)) == 4
    eventually(lambda: other.fetch_versioned("k").result() == Versioned("v4", 4), timeout=harness.settle)


def test_the_mark_covers_every_key_of_a_one_shard_store(harness: Harness, name: str) -> None:
    """A store's default layout is one scope (one ConfigMap shard, one znode root, one
    partition): the next holder's write to one key fences the stale holder's write to another."""
    new = harness.connect().storage(name)
    new.put("a", "new", fence=Fence("job", 2))
    stale = harness.connect().storage(name)
    with pytest.raises(FencedError):
        stale.put("b/c", "stale", fence=Fence("job", 1))
    eventually(lambda: stale.children("") == {"a"}, timeout=harness.settle)
    assert new.children("") == {"a"}


def test_a_lock_token_fences_the_previous_holder(harness: Harness, name: str) -> None:
    """The pattern end to end in one process: lock -> token -> fenced write; the holder that
    lost the lock (crashed, expired) is refused once the next holder wrote."""
    first, second = harness.connect(), harness.connect()
    lock = first.lock(name)
    assert lock.acquire(timeout=harness.settle)
    token = lock.token
    assert token is not None
    store = first.storage(name)
    store.put("state", "first", fence=Fence(name, token))
    successor = second.lock(name)
    harness.crash(first)
    won: list[bool] = []
    thread = threading.Thread(target=lambda: won.append(successor.acquire(timeout=60)))
    thread.start()
    # Time passes until the successor wins: memory's manual clock must move again once the
    # waiter's candidacy exists; real backends' expire() sleeps (as test_locks does).
    deadline = time.monotonic() + 60
    while thread.is_alive() and time.monotonic() < deadline:
        harness.expire()
        thread.join(0.5)
    thread.join(1)
    assert won == [True]
    assert successor.token is not None and successor.token > token
    second.storage(name).update("state", "second", fence=Fence(name, successor.token))
    late = harness.connect().storage(name)  # the first holder's writes, from a fresh client
    with pytest.raises(FencedError):
        late.update("state", "late", fence=Fence(name, token))
    eventually(lambda: late.fetch("state").result() == "second", timeout=harness.settle)


def test_semaphore_slots_fence_per_slot(harness: Harness, name: str) -> None:
    """The semaphore pattern (docs/locks.md): ``Fence(f"{name}-{slot}", token)``, one domain
    per slot, as slot I is the lock ``NAME-I``. Two concurrent holders both write (one
    domain for all slots would refuse whichever holds the lower token), and the holder that
    lost its slot is refused once the slot's next holder wrote."""
    first, second, third = harness.connect(), harness.connect(), harness.connect()
    a, b = first.semaphore(name, 2), second.semaphore(name, 2)
    assert a.acquire(timeout=harness.settle) and b.acquire(timeout=harness.settle)
    assert a.slot is not None and b.slot is not None and {a.slot, b.slot} == {0, 1}
    assert a.token is not None and b.token is not None
    # Read once, as a holder does: on a loaded machine a session may drop and the slot with it,
    # and a fence taken afterwards would read None.
    old_slot, old_token = a.slot, a.token
    b_slot, b_token = b.slot, b.token

    def fence(sem_slot: int, token: int) -> Fence:
        return Fence(f"{name}-{sem_slot}", token)

    store = harness.connect().storage(name)
    store.put("a", "1", fence=fence(old_slot, old_token))
    store.put("b", "1", fence=fence(b_slot, b_token))
    store.update("a", "2", fence=fence(old_slot, old_token))  # both slots' holders keep writing
    store.update("b", "2", fence=fence(b_slot, b_token))
    successor = third.semaphore(name, 2)
    harness.crash(first)
    won: list[bool] = []
    thread = threading.Thread(target=lambda: won.append(successor.acquire(timeout=60)))
    thread.start()
    deadline = time.monotonic() + 60
    while thread.is_alive() and time.monotonic() < deadline:
        harness.expire()
        thread.join(0.5)
    thread.join(1)
    assert won == [True]
    assert successor.slot == old_slot and successor.token is not None and successor.token > old_token
    store.update("a", "3", fence=fence(old_slot, successor.token))
    with pytest.raises(FencedError):
        store.update("a", "late", fence=fence(old_slot, old_token))
    store.update("b", "3", fence=fence(b_slot, b_token))  # the other slot's holder is not fenced
    assert store.fetch("a").result() == "3"


@pytest.mark.parametrize(
    ("fence", "what"),
    [
        ("job", "a kubecoord.Fence"),
        (("job", 1), "a kubecoord.Fence"),
        (Fence("Not_A_Label", 1), "DNS-1123"),
        (Fence("job", -1), "int >= 0"),
        (Fence("job", True), "int >= 0"),
        (Fence("job", 1.0), "int >= 0"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_fence_raises_before_any_request(harness: Harness, name: str, fence: object, what: str) -> None:
    kv = harness.connect().storage(name)
    for write in (
        lambda: kv.put("k", "v", fence=fence),  # type: ignore[arg-type]
        lambda: kv.update("k", "v", fence=fence),  # type: ignore[arg-type]
        lambda: kv.delete("k", fence=fence),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidArgumentError, match=what):
            write()
    assert kv.fetch("k").result() is None


def test_the_election_runner_hands_the_work_an_epoch_that_fences_the_previous_term(
    harness: Harness, name: str
) -> None:
    """Each term's work writes with Fence(service, epoch) from on_started_leading; once the
    next term wrote, a write with the previous term's epoch is refused."""
    epochs: list[int] = []

    def term(coordinator_store: Storage) -> LeadingCallback:
        def lead(epoch: int, stop: threading.Event) -> None:
            epochs.append(epoch)
            coordinator_store.put(f"term-{len(epochs)}", "work", fence=Fence(name, epoch))
            # returning ends the term: the runner resigns, and the next candidate leads

        return lead

    first, second = harness.connect(), harness.connect()
    first.leader_election(name).run(term(first.storage(name)))
    second.leader_election(name).run(term(second.storage(name)))
    assert len(epochs) == 2 and epochs[1] > epochs[0]
    late = harness.connect().storage(name)
    with pytest.raises(FencedError):
        late.put("late", "deposed term", fence=Fence(name, epochs[0]))
    eventually(lambda: late.children("") == {"term-1", "term-2"}, timeout=harness.settle)


def test_concurrent_fenced_writers_never_land_a_lower_token_after_a_higher_one(harness: Harness, name: str) -> None:
    """Four writers, each on its own coordinator, race with interleaved rising tokens
    (writer i sends i, i+4, i+8, ...). Ordered by the versions they got, the accepted
    writes' tokens never go down: the check and the write are one step."""
    writers, rounds = 4, 8
    harness.connect().storage(name).put("k", "0")
    accepted: list[tuple[int, int]] = []
    refused: list[int] = []
    lock = threading.Lock()

    def write(index: int) -> None:
        store = harness.connect().storage(name)
        for round_ in range(rounds):
            token = round_ * writers + index
            try:
                version = store.update("k", str(token), fence=Fence("race", token))
            except FencedError:
                with lock:
                    refused.append(token)
            else:
                with lock:
                    accepted.append((version, token))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not any(thread.is_alive() for thread in threads)
    assert len(accepted) + len(refused) == writers * rounds
    tokens = [token for _, token in sorted(accepted)]
    assert tokens == sorted(tokens), f"a lower token landed after a higher one: {sorted(accepted)}"
    assert len({version for version, _ in accepted}) == len(accepted)
    last_version, last_token = max(accepted)
    eventually(lambda: harness.connect().storage(name).fetch_versioned("k").result()
               == Versioned(str(last_token), last_version), timeout=harness.settle)
