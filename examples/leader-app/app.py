"""A leader-elected application in a Kubernetes cluster: the in-cluster story end to end.

    POD_NAME=$(hostname) APP_ELECTION=billing python app.py     # kubernetes:// = the pod's namespace

APP_ELECTION names the LeaderElection, APP_STORE the KVStore (default: the election's
name); both must exist in the namespace, with this pod's ServiceAccount in spec.clients.

- Identity: POD_NAME (the downward API in deployment.yaml) is the candidate id, so the
  LeaderElection's status and the Lease name the pod that leads.
- Rights: the pod's serviceAccountName is listed in spec.clients of the LeaderElection and
  of the KVStore; the operator turns that into a Role and RoleBinding. Until they exist
  the app gets PermissionDeniedError: it logs one clear line ("waiting_for_permission",
  naming the resource, and saying that either it does not exist or the ServiceAccount
  is not in its spec.clients: RBAC answers the same 403 to both) and retries with
  backoff (1 s doubling to 30 s), never crashes; the kubelet has nothing to restart.
- The work runs on election.run() (client-go's RunOrDie): lead() is called with the epoch
  and a stop event each time this pod leads; the event is set the moment the pod stops
  leading (before another pod can lead), and the runner re-enters the election.
- SIGTERM (a rollout, a drain): the runner sets the stop event, waits for lead() to
  return, then resigns, so a standby replica takes over at once instead of after the
  lease duration.
- Fencing: the leader's epoch rises on every change of leader. Every result goes to the
  KVStore key "output" with a compare-and-set that refuses to replace a result written
  under a higher epoch, so a paused or partitioned old leader cannot overwrite its
  successor's work however late it wakes.

Each line on stdout is one JSON object with an "event".
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import kubecoord
from kubecoord import KeyExistsError, PermissionDeniedError, VersionConflictError

T = TypeVar("T")
stopping = threading.Event()


def log(event: str, **fields: Any) -> None:
    print(json.dumps({"ts": time.time(), "event": event, **fields}), flush=True)


def until_permitted(what: str, action: Callable[[], T]) -> T:
    """``action()``, retried while RBAC refuses it (the RoleBinding may not exist yet)."""
    delay = 1.0
    while True:
        try:
            return action()
        except PermissionDeniedError as error:
            log("waiting_for_permission", action=what, retry_in=delay,
                hint=f"{what.split(' ', 1)[-1]} must exist in this namespace with this pod's ServiceAccount "
                "in its spec.clients", error=str(error)[:600])
            if stopping.wait(delay):
                raise SystemExit(0) from None
            delay = min(delay * 2, 30.0)


class Fenced(Exception):
    """A result from a newer epoch is already stored: this replica is no longer the leader."""


def write_fenced(store: kubecoord.Storage, epoch: int, result: str) -> None:
    """Store ``result`` unless a result of a higher epoch is there (compare-and-set)."""
    value = json.dumps({"epoch": epoch, "result": result})
    while True:
        current = store.fetch_versioned("output").result()
        if current is None:
            try:
                store.put("output", value)
                return
            except KeyExistsError:
                continue
        if json.loads(current.value)["epoch"] > epoch:
            raise Fenced(f"epoch {epoch} is stale")
        try:
            store.update("output", value, expected_version=current.version)
            return
        except VersionConflictError:
            continue


def main() -> int:
    me = os.environ.get("POD_NAME") or f"{os.uname().nodename}-{os.getpid()}"
    name = os.environ.get("APP_ELECTION", "billing")
    store_name = os.environ.get("APP_STORE", name)
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
    with kubecoord.connect(os.environ.get("KUBECOORD_URL", "kubernetes://")) as coordinator:
        election = until_permitted(f"bind LeaderElection {name}", lambda: coordinator.leader_election(name))
        store = until_permitted(f"bind KVStore {store_name}", lambda: coordinator.storage(store_name))

        def lead(epoch: int, stop: threading.Event) -> None:
            """One term: a result every 0.5 s, fenced by the epoch, until the term ends."""
            log("leading", id=me, epoch=epoch)
            runs = 0
            while not stop.wait(0.5):
                runs += 1
                try:
                    until_permitted("write", functools.partial(write_fenced, store, epoch, f"{me} run {runs}"))
                except Fenced as stale:
                    log("fenced", id=me, epoch=epoch, reason=str(stale))
                    return  # the runner resigns; the pod stops (a new epoch leads elsewhere)
                log("wrote", id=me, epoch=epoch, run=runs)

        def campaign() -> None:
            # The runner owns its handle (closed when run returns): a fresh one per attempt,
            # so a nomination refused for want of a RoleBinding can be retried.
            runner = coordinator.leader_election(name)
            log("candidate", id=me)
            runner.run(lead, lambda: log("stopped_leading", id=me), candidate_id=me, stop=stopping)

        election.close()  # bound above only to wait for the grant
        until_permitted("run for election", campaign)
        log("stopping", id=me)
    log("released", id=me)  # the runner resigned and the coordinator closed: the Lease is free
    return 0


if __name__ == "__main__":
    sys.exit(main())
