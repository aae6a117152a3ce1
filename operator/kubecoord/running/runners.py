"""The runners: client-go's RunOrDie and kazoo's Election.run, for elections and locks.

Usage::

    def lead(epoch: int, stop: threading.Event) -> None:
        state = coord.storage("billing-state")
        while not stop.wait(1.0):  # a deposed term's late write raises FencedError
            state.update("plan", reconcile(), fence=Fence("billing", epoch))

    coord.leader_election("billing").run(lead, on_stopped_leading=lambda: log.info("follower"))
    coord.lock("nightly").run(lambda token, lost: report.put("out", export(), fence=Fence("nightly", token)))

One term, written once (``_Term``): the work runs on its own thread; the runner's thread
watches the hold (is_leader()/is_held(), answered locally, every ``check_interval``)
and ``stop``. On a loss it sets the term's event and calls on_stopped_leading at once —
is_leader() turns False at the renew deadline, before anybody else can acquire, so the
event is set before a successor can start, provided this process runs (a frozen process
learns of the loss only when it runs again: the fencing token covers that). On a
voluntary end (stop, signal, the work returned) the runner sets the event, waits for the
work to return while still holding, and only then resigns/releases, so a successor starts
after the work stopped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from kubecoord.errors import ClosedError, CoordinationError, InvalidArgumentError
from kubecoord.running.identity import default_id
from kubecoord.running.signals import stopping_on_signals

log = logging.getLogger("kubecoord.locking")

_T = TypeVar("_T")

class Term(Protocol):
    """What the election runner reads of a leader: kubecoord.api.Leader."""

    @property
    def id(self) -> str: ...

    @property
    def epoch(self) -> int: ...


class Candidacy(Protocol):
    """What the election runner uses of kubecoord.api.LeaderElection (declared here, below
    the interface, so that the interface's run() can call down to it)."""

    @property
    def service(self) -> str: ...

    def add_listener(self, listener: Callable[[str | None], None]) -> None: ...

    def remove_listener(self, listener: Callable[[str | None], None]) -> None: ...

    def nominate(self, candidate_id: str, data: str = "") -> object: ...

    def is_leader(self, candidate_id: str) -> bool: ...

    def get_leader(self) -> Term | None: ...

    def resign(self, candidate_id: str) -> None: ...

    def close(self) -> None: ...


class Holding(Protocol):
    """What the lock runner uses of kubecoord.api.Lock."""

    @property
    def name(self) -> str: ...

    @property
    def token(self) -> int | None: ...

    def acquire(
        self, timeout: float | None = None, blocking: bool = True, *, cancel: threading.Event | None = None
    ) -> bool: ...

    def is_held(self) -> bool: ...

    def release(self) -> None: ...


PROBE_PERIOD = 1.0
"""While waiting to lead, how often the runner checks that its handle is still open."""


class _Term(Generic[_T]):
    """One term of work: ``fn(token, event)`` on a worker thread, and how it ended."""

    def __init__(self, fn: Callable[[int, threading.Event], _T], token: int, name: str) -> None:
        self.event = threading.Event()
        self.result: _T | None = None
        self.error: BaseException | None = None
        self._fn = fn
        self._token = token
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)

    def _work(self) -> None:
        try:
            self.result = self._fn(self._token, self.event)
        except BaseException as exc:  # re-raised by the runner after it gave the hold up
            self.error = exc

    def start(self) -> None:
        self._thread.start()

    def finished(self) -> bool:
        return not self._thread.is_alive()

    def wait(self, seconds: float | None) -> None:
        self._thread.join(seconds)

    def watch(self, holds: Callable[[], bool], stop: threading.Event, check_interval: float) -> bool:
        """Until the work returns, ``stop`` is set or ``holds()`` turns False. True when the
        term ends voluntarily (work returned, stop), False on a loss."""
        while True:
            if self.finished() or stop.is_set():
                return True
            if not holds():
                return False
            self.wait(check_interval)


def _check_interval(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 10:
        raise InvalidArgumentError(f"check_interval must be a number of seconds in (0, 10], got {value!r}")
    return float(value)


def _call(callback: Callable[[], object] | None, what: str) -> None:
    if callback is None:
        return
    try:
        callback()
    except Exception:  # the runner must still give the hold up and go on
        log.exception("%s raised", what)


def run_election(
    election: Candidacy,
    on_started_leading: Callable[[int, threading.Event], object],
    on_stopped_leading: Callable[[], object] | None,
    *,
    candidate_id: str | None,
    data: str,
    stop: threading.Event | None,
    signals: bool,
    check_interval: float,
) -> None:
    """LeaderElection.run (kubecoord.api says what it promises). The runner owns the
    handle: it is closed when run returns (a candidate that does not lead can only be
    withdrawn by closing its handle)."""
    interval = _check_interval(check_interval)
    candidate = candidate_id if candidate_id is not None else default_id()
    stop = stop if stop is not None else threading.Event()
    changed = threading.Event()

    def listener(leader: str | None) -> None:
        changed.set()

    election.add_listener(listener)
    try:
        with stopping_on_signals(stop, signals):
            election.nominate(candidate, data)
            probe_at = time.monotonic() + PROBE_PERIOD
            while not stop.is_set():
                changed.clear()
                if not election.is_leader(candidate):
                    changed.wait(interval)  # woken by the listener; the interval bounds stop's latency
                    if time.monotonic() >= probe_at:
                        # A closed (or crashed) handle says nothing to listeners: ask it,
                        # through a call that raises ClosedError once it is closed.
                        probe_at = time.monotonic() + PROBE_PERIOD
                        election.get_leader()
                    continue
                leader = election.get_leader()
                if leader is None or leader.id != candidate:
                    continue
                term: _Term[object] = _Term(on_started_leading, leader.epoch, f"kubecoord-leading-{election.service}")
                term.start()
                voluntary = term.watch(lambda: election.is_leader(candidate), stop, interval)
                term.event.set()
                if not voluntary:
                    log.info("leadership lost; work told to stop", extra={"service": election.service})
                    _call(on_stopped_leading, "on_stopped_leading")
                    term.wait(None)
                    probe_at = time.monotonic()
                    continue  # still a candidate: the backend runs it for the next term
                term.wait(None)
                election.resign(candidate)
                _call(on_stopped_leading, "on_stopped_leading")
                if term.error is not None:
                    raise term.error
                return
    except ClosedError:
        return  # the handle or its coordinator was closed: the candidacy went with it
    finally:
        election.remove_listener(listener)
        try:
            election.close()
        except CoordinationError as exc:
            log.info("could not close the election handle", extra={"service": election.service, "error": str(exc)})


def run_lock(
    lock: Holding,
    fn: Callable[[int, threading.Event], _T],
    *,
    timeout: float | None,
    stop: threading.Event | None,
    signals: bool,
    check_interval: float,
) -> _T | None:
    """Lock.run (kubecoord.api says what it promises)."""
    interval = _check_interval(check_interval)
    stop = stop if stop is not None else threading.Event()
    with stopping_on_signals(stop, signals):
        if not lock.acquire(timeout, cancel=stop):
            return None
        token = lock.token
        if token is None:  # lost between the acquire and this line
            return None
        term: _Term[_T] = _Term(fn, token, f"kubecoord-holding-{lock.name}")
        term.start()
        voluntary = term.watch(lock.is_held, stop, interval)
        term.event.set()
        if not voluntary:
            log.info("lock lost; work told to stop", extra={"lock": lock.name})
        term.wait(None)
        if lock.is_held():
            lock.release()
        if term.error is not None:
            raise term.error
        return term.result
