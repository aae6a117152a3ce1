"""The seeded fault schedule: which fault, when, for how long. Pure: no process is touched.

The same seed, duration and kinds give the same schedule. Every kind is scheduled at
least once (rounds of all kinds in a shuffled order), so a short soak still injects
each one; the schedule may run past ``duration`` to finish its first round.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

KILL_LEADER = "kill9_leader"
KILL_MEMBER = "kill9_member"
PAUSE = "sigstop_pause"
DELAY = "proxy_delay"
DROP = "proxy_drop"
HOLD = "proxy_hold"
CUT = "proxy_cut"
CLOCK_JUMP = "clock_jump"
DELETE_LEASE = "delete_lease"
DELETE_CONFIGMAP = "delete_configmap"

COMMON_KINDS = (KILL_LEADER, KILL_MEMBER, PAUSE, DELAY, DROP, HOLD, CUT, CLOCK_JUMP)
"""Kinds every backend gets; a backend adds its server restarts and deletions."""


@dataclass(frozen=True, slots=True)
class Fault:
    at: float
    """Seconds after the start of the schedule."""
    kind: str
    duration: float
    """How long the fault lasts before it is healed (0: instantaneous)."""
    pick: int
    """A random number the injector uses to choose its target (a seeded choice)."""


def durations(kind: str, *, lease: float, rng: random.Random) -> float:
    if kind == PAUSE:
        return lease + rng.uniform(1.0, 3.0)  # longer than the lease: the others must take over
    if kind == DELAY:
        return rng.uniform(3.0, 6.0)
    if kind in (DROP, HOLD):
        return rng.uniform(2.0, lease + 1.0)
    return 0.0


def make_schedule(
    seed: int, duration: float, kinds: tuple[str, ...], *, lease: float, warmup: float = 6.0
) -> list[Fault]:
    rng = random.Random(seed)
    faults: list[Fault] = []
    at = warmup
    first_round = True
    while first_round or at < duration:
        order = list(kinds)
        rng.shuffle(order)
        for kind in order:
            if not first_round and at >= duration:
                break
            length = durations(kind, lease=lease, rng=rng)
            faults.append(Fault(at=round(at, 3), kind=kind, duration=round(length, 3), pick=rng.randrange(1 << 30)))
            # Time to recover before the next fault: a new leader, a re-joined member.
            at += length + rng.uniform(1.5, 3.5)
        first_round = False
    return faults
