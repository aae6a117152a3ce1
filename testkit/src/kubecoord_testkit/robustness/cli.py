"""``kubecoord-testkit robustness``: client traffic on one or more backends under a seeded
schedule of faults, every operation recorded, each backend's history judged by Porcupine;
exit 3 when a history has no linearization.

Clients per backend: KV clients (server reads, create-only puts, conditional and blind
updates, deletes on three shared keys), lock clients (one lock) and semaphore clients (2
slots), whose holds write with fences; processes, or threads on memory://. Faults: kill -9
of a client (a new one takes its place), the fault proxy's delays, holds, drops and cuts,
kill -9 and restart of the server, and on kubernetes and kubernetes-cluster of etcd under
the running kube-apiserver. Output (--out): per backend NAME/records/, NAME/faults.jsonl, NAME/history.json,
NAME/result.json, and NAME/porcupine/ on a violation (the history and Porcupine's HTML
visualisations); robustness.json (every backend's figures).
Exit: 0 every history linearizable; 3 a violation; 1 the run failed (a server would not
start, the checker timed out or is missing); 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kubecoord.cli.exits import ERROR, OK, VIOLATIONS, UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubecoord_testkit.robustness.backends import ALL_FAULTS, BACKENDS

    parser.add_argument("--backend", required=True, metavar="NAME[,NAME...]",
                        help=f"one or more of {', '.join(BACKENDS)}, one after another")
    parser.add_argument("--duration", type=float, default=60.0, metavar="SECONDS",
                        help="seconds of traffic and faults per backend (default 60)")
    parser.add_argument("--seed", type=int, default=1, help="the fault schedule's and the traffic's seed (default 1)")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--kv-clients", type=int, default=3)
    parser.add_argument("--lock-clients", type=int, default=2)
    parser.add_argument("--semaphore-clients", type=int, default=3)
    parser.add_argument("--fault-every", type=float, default=2.5, metavar="SECONDS",
                        help="mean pause between faults (default 2.5)")
    parser.add_argument("--faults",
                        help=f"comma-separated kinds (default: all a backend can suffer): {', '.join(ALL_FAULTS)}")
    parser.add_argument("--skip-faults", default="", help="comma-separated kinds not to inject")


def run(args: argparse.Namespace) -> int:
    from kubecoord_testkit.robustness.backends import ALL_FAULTS, BACKENDS
    from kubecoord_testkit.robustness.checker import missing_reason
    from kubecoord_testkit.robustness.runner import Plan
    from kubecoord_testkit.robustness.runner import run as run_tier

    backends = [name for name in args.backend.split(",") if name]
    unknown = [name for name in backends if name not in BACKENDS]
    if unknown or not backends:
        raise UsageError(f"unknown backend(s) {unknown}; choose from {', '.join(BACKENDS)}")
    named = {kind for kind in f"{args.faults or ''},{args.skip_faults}".split(",") if kind}
    if named - set(ALL_FAULTS):
        raise UsageError(f"unknown fault kind(s) {sorted(named - set(ALL_FAULTS))}; known: {', '.join(ALL_FAULTS)}")
    if args.duration <= 0 or args.fault_every <= 0:
        raise UsageError("--duration and --fault-every must be positive")
    reason = missing_reason()
    if reason is not None:
        print(f"kubecoord-testkit robustness: {reason}", flush=True)
        return ERROR
    wanted = [kind for kind in args.faults.split(",") if kind] if args.faults else None
    skipped = {kind for kind in args.skip_faults.split(",") if kind}
    figures = {}
    status = OK
    for name in backends:
        kinds = [kind for kind in (wanted or BACKENDS[name].faults) if kind in BACKENDS[name].faults]
        plan = Plan(
            backend=name, duration=args.duration, seed=args.seed, kv_clients=args.kv_clients,
            lock_clients=args.lock_clients, semaphore_clients=args.semaphore_clients,
            faults=tuple(kind for kind in kinds if kind not in skipped), fault_every=args.fault_every,
        )
        result = run_tier(plan, args.out / name)
        print(f"kubecoord-testkit robustness: {result.summary()}", flush=True)
        if result.verdict.stderr:
            print(result.verdict.stderr, flush=True)
        figures[name] = {**result.figures, "status": result.verdict.status}
        if result.verdict.status == 1:
            status = VIOLATIONS
        elif result.verdict.status != 0 and status == OK:
            status = ERROR
    (args.out / "robustness.json").write_text(json.dumps({"seed": args.seed, "duration": args.duration,
                                                           "backends": figures}, indent=2) + "\n")
    return status
