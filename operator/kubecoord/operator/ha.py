"""Operator high availability: kopf runs only on the replica that holds a kubecoord Lease.

Every replica nominates itself (POD_NAME) in the kubecoord LeaderElection
``kubecoord-operator`` (KUBECOORD_OPERATOR_LEASE) in its own namespace (POD_NAMESPACE), on the kubernetes backend —
the same Lease protocol applications use, not kopf's priority peering (kopf runs with
``--standalone``). The leader runs kopf's reconciliation; standbys wait.

Guarantees:
- At most one replica reconciles at a time as far as Lease timings allow: the active
  replica stops kopf as soon as its own renew deadline passes without a renewal
  (``is_leader()`` turns False before any other candidate may acquire).
- A standby takes over within the lease duration after the active replica dies, and at
  once after it shuts down cleanly (it resigns on exit).
- After losing leadership the process exits with status 1, as client-go controllers do:
  the restart rejoins as a standby with fresh state.
- Every write request of the active replica is abandoned before a standby may acquire
  (its timeout is at most lease duration - renew deadline; kubecoord.operator.fencing).
- With ``fence`` (``--fence-writes``), every write names this replica's term and the API
  server refuses a stale one: the replica starts only once ``term.confirm`` has seen the
  API server admit its term and refuse another (kubecoord.operator.term), and exits with
  status 1 when it cannot.
Not guaranteed without ``fence``: that the API server does not apply a write already in
flight when leadership is lost.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

from kubecoord.api import Coordinator, LeaderElection
from kubecoord.operator import fencing, metrics, term
from kubecoord.operator.health import HealthState

log = logging.getLogger("kubecoord.operator.ha")

ELECTION = "kubecoord-operator"
WATCHDOG_SECONDS = 0.2


@dataclass(frozen=True, slots=True)
class Scope:
    namespaces: tuple[str, ...]
    clusterwide: bool


def run_when_leading(
    coordinator: Coordinator,
    identity: str,
    scope: Scope,
    health: HealthState,
    run_operator: Callable[[Scope, threading.Event], None] | None = None,
    *,
    election: str = ELECTION,
    lease_duration: float | None = None,
    renew_deadline: float | None = None,
    fence: str | None = None,
) -> int:
    """Block until this replica leads, run the operator until stopped; the exit status.
    ``lease_duration`` and ``renew_deadline``: the operator Lease's timings (the coordinator's),
    which bound every write request (kubecoord.operator.fencing); ``fence``: the operator
    Lease's namespace, when every write names the term and the API server refuses a stale
    one (kubecoord.operator.term)."""
    stop = threading.Event()  # SIGTERM/SIGINT or lost leadership: stop kopf
    lost = threading.Event()
    _install_signal_handlers(stop)
    username = term.whoami() if fence is not None else ""
    handle = coordinator.leader_election(election)
    health.role = "standby"
    handle.nominate(identity, data=f"operator {identity}")
    log.info("standing by for the operator lease", extra={"identity": identity})
    while not handle.is_leader(identity):
        if stop.wait(WATCHDOG_SECONDS):
            health.stopping = True
            handle.close()
            return 0
    health.role = "leader"
    headers: dict[str, str] = {}
    if fence is not None:
        try:
            headers = _confirm_term(handle, identity, username, fence, renew_deadline)
        except term.FencingUnavailable as error:
            log.error("cannot fence this replica's writes: not reconciling", extra={"identity": identity,
                                                                                     "error": str(error)})
            health.stopping = True
            handle.close()
            return 1
    # Every API write asks first, names its term, and none outlives the term it was sent in.
    fencing.install(lambda: handle.is_leader(identity), lease_duration=lease_duration, renew_deadline=renew_deadline,
                    headers=headers)
    metrics.IS_LEADER.set(1)
    log.info("leading: starting reconciliation", extra={"identity": identity})

    def watchdog() -> None:
        while not stop.wait(WATCHDOG_SECONDS):
            if not handle.is_leader(identity):
                log.error("lost the operator lease: stopping reconciliation", extra={"identity": identity})
                lost.set()
                stop.set()

    threading.Thread(target=watchdog, name="kubecoord-operator-watchdog", daemon=True).start()
    try:
        if run_operator is not None:
            run_operator(scope, stop)
        else:
            run_kopf(scope, stop, health)
    finally:
        fencing.install(lambda: False)  # no write after this point, whatever is still running
        metrics.IS_LEADER.set(0)
        health.stopping = True
        stop.set()
        handle.close()  # resigns: a standby takes over at once
    return 1 if lost.is_set() else 0


def _confirm_term(handle: LeaderElection, identity: str, username: str, namespace: str,
                  renew_deadline: float | None) -> dict[str, str]:
    """The headers of this replica's term, once the API server fences by it."""
    leader = handle.get_leader()
    if leader is None or leader.id != identity:
        raise term.FencingUnavailable("the operator Lease was lost before its term could be confirmed")
    current = term.Term(identity, leader.epoch)
    term.confirm(username, current, namespace, timeout=renew_deadline or 10.0,
                 leading=lambda: handle.is_leader(identity))
    if not handle.is_leader(identity):
        raise term.FencingUnavailable("the operator Lease was lost while its term was being confirmed")
    log.info("writes fenced at the API server", extra={"identity": identity, "term": str(current)})
    return term.headers(username, current)


def run_kopf(scope: Scope, stop: threading.Event, health: HealthState | None = None) -> None:
    """kopf's operator in this thread's own event loop until ``stop`` is set; ``health``
    gets a beat from that loop every WATCHDOG_SECONDS (its /healthz turns 503 when they stop)."""
    import kopf  # only the active replica needs kopf

    import kubecoord.operator.handlers  # noqa: F401  (registers the handlers)
    from kubecoord.operator.connections import connections

    async def main() -> None:
        # kopf would wait for a threading.Event in an executor thread (which outlives the
        # loop), so relay ``stop`` to an asyncio.Event from this task, older than kopf's.
        flag = asyncio.Event()
        running = asyncio.create_task(
            kopf.operator(
                standalone=True,
                clusterwide=scope.clusterwide,
                namespaces=list(scope.namespaces),
                stop_flag=flag,
            )
        )
        while not running.done():
            if health is not None:
                health.beat()  # runs on kopf's loop: it stops when that loop stops progressing
            if stop.is_set():
                flag.set()
            await asyncio.wait({running}, timeout=WATCHDOG_SECONDS)
        await running

    # kopf runs in a thread of its own: off the main thread it installs no signal handlers,
    # so SIGTERM reaches ours (stop -> flag), the path on which kopf exits at once.
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            asyncio.run(main())
        except BaseException as error:
            failure.append(error)

    thread = threading.Thread(target=serve, name="kubecoord-kopf")
    thread.start()
    try:
        while thread.is_alive():
            thread.join(WATCHDOG_SECONDS)
    finally:
        stop.set()
        thread.join()
        connections.close_all()
    if failure:
        raise failure[0]


def _install_signal_handlers(stop: threading.Event) -> None:
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handler)
