"""Background steps: call step() again after the delay step() returns, or sooner when woken
(by a watch event). One Loop per elector and one per group handle, on every backend that
runs the lease core — but not one thread each: every Loop of the process runs on a shared
scheduler with a few worker threads.

Guarantees: one Loop's steps never overlap (and hold its ``lock``); a wake() during a step
runs the next step as soon as that one ends; after stop() returns (with ``join``) no step
of that Loop runs again. Workers: one is kept, more are started while every worker is
busy and a step is overdue by OVERDUE (a step blocked on a slow API server must not hold up the others'
renewals; a watcher thread notices it when no worker is free to), up to MAX_WORKERS; extra
workers end after IDLE_SECONDS without work. Idle workers wait on a stack: the one that went
idle last takes the next step, so the others really stay idle and end (woken in turn, as by
one shared condition, every worker of a burst got a step now and then under steady light
work, and none ever ended). So the thread count follows how many steps are in flight at
once, not how many Loops exist.

A step may return PARKED: that Loop is then not scheduled at all until its next wake() (a
group handle with no member to renew and none that can expire: an operator observes
thousands of such groups, and stepping each every MAX_SLEEP kept the pool at MAX_WORKERS).

Not guaranteed: punctuality beyond what the workers can do — MAX_WORKERS steps blocked at
once delay every other Loop (MAX_SLEEP still bounds how stale a Loop's view gets once a
worker is free).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable

log = logging.getLogger("kubecoord.lease.loop")

MAX_SLEEP = 5.0
"""Re-check at least this often, whatever step() asked (cheap: step() decides from caches)."""
PARKED = math.inf
"""What step() returns when only a wake() can bring it work: no step until then."""
MAX_WORKERS = 32
OVERDUE = 0.25
"""A step this late with every worker busy starts another worker (steps are mostly quick
cache decisions; a slow one is blocked on the API server)."""
IDLE_SECONDS = 10.0
HANDOFF = 0.05
"""A due step waits this long for a busy worker before an idle one takes it: steps due
together then run one after another on one worker (they are quick) instead of waking every
idle worker at once, which kept them all in use."""


class _Scheduler:
    """A heap of due times and a small elastic pool of workers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        """Held for everything below; stop(join=True) waits on it for the step to end."""
        self._overdue = threading.Condition(self._lock)
        """Wakes the watcher: a thread that starts a worker when every worker is busy and the
        next step becomes overdue, as no worker is free to notice it then (started the first
        time every worker is busy with steps waiting)."""
        self._watching = False
        self._heap: list[tuple[float, int, Loop]] = []
        self._order = itertools.count()
        self._workers = 0
        self._idle: list[threading.Condition] = []
        """The idle workers, each waiting on a condition of its own; the last went idle last
        and alone times the next step."""

    def schedule(self, loop: Loop, due: float) -> None:
        """Run ``loop`` at ``due`` (time.monotonic()); replaces its earlier schedule."""
        with self._cond:
            self._push(loop, due)
            self._watch_if_busy()

    def _push(self, loop: Loop, due: float) -> None:
        """schedule() with self._cond held."""
        token = next(self._order)
        loop._token = token
        heapq.heappush(self._heap, (due, token, loop))
        if self._workers == 0 or self._starved():
            self._start_worker()
        self._wake_idle()

    def _starved(self) -> bool:
        """Every worker busy while a step is overdue: time for one more (self._cond held)."""
        return (
            not self._idle and self._workers < MAX_WORKERS and bool(self._heap)
            and self._heap[0][0] < time.monotonic() - OVERDUE
        )

    def _start_worker(self) -> None:
        self._workers += 1
        worker = threading.Thread(target=self._work, name=f"kubecoord-steps-{self._workers}", daemon=True)
        worker.start()

    def _next(self) -> Loop | None:
        """The next due Loop (marked running), or None when this worker should end."""
        with self._cond:
            idle_since = time.monotonic()
            me: threading.Condition | None = None  # while idle: on the stack
            while True:
                now = time.monotonic()
                self._drop_superseded()
                if self._heap and self._heap[0][0] <= now - self._patience(me):
                    self._leave(me)
                    _, _, loop = heapq.heappop(self._heap)
                    loop._token = -1
                    loop._running = threading.current_thread()
                    if self._starved():
                        self._start_worker()
                    self._watch_if_busy()
                    return loop
                if self._workers > 1 and now - idle_since > IDLE_SECONDS:
                    self._leave(me)
                    self._workers -= 1
                    return None
                if me is None:
                    me = threading.Condition(self._lock)
                    self._idle.append(me)
                if self._idle[-1] is me:
                    wait = min(self._heap[0][0] + self._patience(me) - now, MAX_SLEEP) if self._heap else MAX_SLEEP
                else:  # a spare: nothing to time but its own end
                    wait = idle_since + IDLE_SECONDS - now + 0.01
                me.wait(wait)

    def _patience(self, me: threading.Condition | None) -> float:
        """How late the next step must be for this worker to take it (self._cond held): a
        worker back from a step takes it when due, the idle worker that times the steps when
        due if no worker is busy, HANDOFF late otherwise; the other idle ones never."""
        if me is None:
            return 0.0
        if self._idle[-1] is not me:
            return math.inf
        return 0.0 if len(self._idle) == self._workers else HANDOFF

    def _leave(self, me: threading.Condition | None) -> None:
        """An idle worker goes to work or ends (self._cond held): the next one times the steps."""
        if me is not None:
            self._idle.remove(me)
            self._wake_idle()

    def _wake_idle(self) -> None:
        if self._idle:
            self._idle[-1].notify()

    def _drop_superseded(self) -> None:
        while self._heap and self._heap[0][2]._token != self._heap[0][1]:
            heapq.heappop(self._heap)  # superseded by a later schedule() or stop()

    def _watch_if_busy(self) -> None:
        """Every worker busy while steps wait (self._cond held): the watcher looks at them.
        Not after a worker's own step (it is about to wait for the next one itself)."""
        if self._idle or not self._heap:
            return
        if not self._watching:
            self._watching = True
            threading.Thread(target=self._watch, name="kubecoord-steps-watcher", daemon=True).start()
        self._overdue.notify()

    def _watch(self) -> None:
        """Without it, steps blocked on a slow server in every worker held up the other
        Loops' due steps (their renewals) until some step ended or a wake() came."""
        with self._cond:
            while True:
                self._drop_superseded()
                if self._idle or not self._heap:
                    self._overdue.wait()  # a free worker watches the heap itself
                elif self._starved():
                    self._start_worker()
                    self._overdue.wait(OVERDUE)  # until it took the step, then the next one
                else:  # not overdue yet, or MAX_WORKERS busy: look again then
                    self._overdue.wait(max(self._heap[0][0] + OVERDUE - time.monotonic(), OVERDUE))

    def _work(self) -> None:
        while True:
            loop = self._next()
            if loop is None:
                return
            delay = loop._run_step()
            with self._cond:
                loop._running = None
                if loop._stopped:
                    self._cond.notify_all()  # a stop(join=True) may be waiting for this step
                    continue
                woken, loop._woken = loop._woken, False
                if not woken and delay == PARKED:
                    continue  # until wake() pushes it again
                due = time.monotonic() + (0.0 if woken else min(max(delay, 0.0), MAX_SLEEP))
                self._push(loop, due)

    def wake(self, loop: Loop) -> None:
        with self._cond:
            if loop._stopped or not loop._started:
                return
            if loop._running is not None:
                loop._woken = True
                return
            self._push(loop, time.monotonic())
            self._watch_if_busy()

    def reschedule(self, loop: Loop, delay: float) -> None:
        """A step of ``loop`` was just run outside it (under its lock): its next one is due
        after ``delay``, replacing the pending schedule, which that step made stale."""
        with self._cond:
            if loop._stopped or not loop._started or loop._running is not None:
                return  # a worker is about to step it anyway, and will schedule what that step says
            if delay == PARKED:
                loop._token = -1
                return
            self._push(loop, time.monotonic() + min(max(delay, 0.0), MAX_SLEEP))
            self._watch_if_busy()

    def stop(self, loop: Loop, *, join: bool, timeout: float) -> None:
        with self._cond:
            loop._stopped = True
            loop._token = -1
            if not join or loop._running is None or loop._running is threading.current_thread():
                return
            deadline = time.monotonic() + timeout
            while loop._running is not None and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())


_scheduler = _Scheduler()


class Loop:
    def __init__(self, name: str, step: Callable[[], float], *, lock: threading.Lock | None = None) -> None:
        self.name = name
        self._step = step
        self._step_lock = lock or threading.Lock()
        self._token = -1
        self._running: threading.Thread | None = None
        self._woken = False
        self._stopped = False
        self._started = False

    def start(self) -> None:
        self._started = True
        _scheduler.schedule(self, time.monotonic())

    def wake(self) -> None:
        _scheduler.wake(self)

    def reschedule(self, delay: float) -> None:
        """Call with this Loop's lock held, after running its step outside it (a watch's
        poke): the next step is due after ``delay`` (what that step returned). Without it
        the Loop keeps the schedule of its own last step — e.g. a follower's wait for the
        lease to expire, while the poke made it leader and its renewals are due sooner."""
        _scheduler.reschedule(self, delay)

    def stop(self, *, join: bool = True, timeout: float = 10.0) -> None:
        """Stop after the current step; with ``join`` wait for it (never from the loop itself)."""
        _scheduler.stop(self, join=join, timeout=timeout)

    @property
    def stopped(self) -> bool:
        return self._stopped

    def _run_step(self) -> float:
        with self._step_lock:
            if self._stopped:
                return MAX_SLEEP
            try:
                return self._step()
            except Exception:  # a bug in one step must not end leadership handling silently
                log.exception("background step failed", extra={"loop": self.name})
                return 1.0
