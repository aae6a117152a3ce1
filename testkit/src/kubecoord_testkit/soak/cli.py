"""``kubecoord-testkit soak``: client processes on one backend under a seeded schedule of faults,
then the analytics pipeline over their event logs; exit 3 on any safety violation.

Processes: 3 leader-election candidates, 3 group members and 3 KV writers (compare-and-set
counters), each a separate process writing its own event log. Faults (every kind at
least once, in a seeded order): kill -9 of the leader and of a member or writer (a new
process takes its slot); SIGSTOP/SIGCONT longer than the lease; a TCP proxy in front of
every server that delays, blackholes, holds and resets traffic; restarts of the servers
(zookeeper: a follower and the leader of a 3-node ensemble; etcd: a follower and the Raft
leader of a 3-member cluster; emulator: the API emulator; kubernetes: kube-apiserver, and
etcd under it); one process's wall clock offset, then
stepped (its log timestamps); on Kubernetes, Leases and ConfigMaps deleted behind the
clients' backs.

Backends: zookeeper, etcd, cassandra, emulator (kubernetes:// on the API emulator),
kubernetes (a real kube-apiserver and etcd from ../shared/k8s; run from a checkout).
memory:// is in-process only and is not soaked across processes.

Output (--out): per backend NAME/logs/ (one event log per process), NAME/stderr/,
NAME/faults.jsonl (what each fault hit, when); report/ (the pipeline's tables,
summary.json and report.html over every backend's logs) and soak.json (the figures).
Exit: 0 no violation; 3 safety violations; 1 the soak itself failed (a server would not
start, a fault could not be injected, a client process crashed, the pipeline failed);
2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from kubecoord.cli.exits import ERROR, OK, VIOLATIONS, UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubecoord_testkit.soak.backends import BACKENDS

    parser.add_argument(
        "--backend",
        required=True,
        metavar="NAME[,NAME...]",
        help=f"one or more of {', '.join(sorted(BACKENDS))}, soaked one after another; one pipeline run judges "
        "all their logs",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=90.0,
        metavar="SECONDS",
        help="length of the fault schedule (default 90; the first round of every kind always runs)",
    )
    parser.add_argument(
        "--backend-duration",
        action="append",
        default=[],
        metavar="NAME=SECONDS",
        help="--duration for one backend (repeatable); a short one runs the first round of every kind only",
    )
    parser.add_argument("--seed", type=int, default=1, help="the schedule's seed (default 1)")
    parser.add_argument("--out", type=Path, required=True, help="output folder (logs, faults, report)")
    parser.add_argument("--candidates", type=int, default=3)
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--writers", type=int, default=3)
    parser.add_argument("--lockers", type=int, default=2, help="processes racing for one lock (default 2)")
    parser.add_argument(
        "--clock-offset",
        type=float,
        default=0.6,
        metavar="SECONDS",
        help="wall-clock offset of one candidate (default 0.6; it is later stepped to -0.6, +0.8, +0.3)",
    )
    parser.add_argument(
        "--skew-tolerance",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="what the pipeline is told to tolerate (default 1.0)",
    )
    parser.add_argument("--kinds", help="comma-separated fault kinds to inject (default: all each backend supports)")
    parser.add_argument("--skip-kinds", default="", help="comma-separated fault kinds not to inject")


def run(args: argparse.Namespace) -> int:
    from kubecoord_testkit.soak import schedule as kinds
    from kubecoord_testkit.soak import verdict
    from kubecoord_testkit.soak.backends import BACKENDS
    from kubecoord_testkit.soak.runner import SoakConfig
    from kubecoord_testkit.soak.runner import run as run_soak

    backends = [name for name in args.backend.split(",") if name]
    unknown = [name for name in backends if name not in BACKENDS]
    if unknown or not backends:
        raise UsageError(f"unknown backend(s) {unknown}; choose from {', '.join(sorted(BACKENDS))}")
    if args.duration <= 0 or min(args.candidates, args.members, args.writers) < 1:
        raise UsageError("--duration must be positive and every role needs at least one process")
    known = {*kinds.COMMON_KINDS, *(kind for backend in BACKENDS.values() for kind in backend.extra_kinds)}
    named = {k for k in f"{args.kinds or ''},{args.skip_kinds}".split(",") if k}
    if named - known:
        raise UsageError(f"unknown fault kind(s) {sorted(named - known)}; known: {', '.join(sorted(known))}")
    durations = {name: args.duration for name in backends}
    for item in args.backend_duration:
        name, _, seconds = item.partition("=")
        try:
            value = float(seconds)
        except ValueError:
            value = -1.0
        if name not in durations or value <= 0:
            raise UsageError(f"--backend-duration {item!r}: expected NAME=SECONDS for a soaked backend, SECONDS > 0")
        durations[name] = value
    if abs(args.clock_offset) * 4 / 3 >= args.skew_tolerance:
        raise UsageError("the stepped clock offset (4/3 x --clock-offset) must stay below --skew-tolerance")

    def say(line: str) -> None:
        print(f"kubecoord-testkit soak: {line}" if not line.startswith(" ") else line, flush=True)

    started = time.monotonic()
    runs: dict[str, Any] = {}
    for name in backends:
        config = SoakConfig(
            backend=name,
            duration=durations[name],
            seed=args.seed,
            out=args.out / name,
            candidates=args.candidates,
            members=args.members,
            writers=args.writers,
            lockers=args.lockers,
            clock_offset=args.clock_offset,
            kinds=tuple(k for k in args.kinds.split(",") if k) if args.kinds else None,
            skip_kinds=tuple(k for k in args.skip_kinds.split(",") if k),
        )
        result = run_soak(config, say=say)
        runs[name] = {
            "duration": durations[name],
            "seconds": round(result.seconds, 1),
            "processes": result.processes,
            "restarts": result.restarts,
            "faults": dict(sorted(result.injected.items())),
            "kinds": list(result.kinds),
            "fault_failures": [f for f in result.faults if str(f["what"]).startswith("FAILED")],
            "crashed_processes": {w: c for w, c in result.exit_codes.items() if c not in (0, -9)},
        }
        say(
            f"{name}: schedule done in {result.seconds:.0f} s; {result.processes} processes "
            f"({result.restarts} restarts)"
        )
    say("running the pipeline over every process's log")
    judged = verdict.analyze(
        [args.out / name / "logs" for name in backends], args.out / "report", skew=args.skew_tolerance,
        faults=[args.out / name / "faults.jsonl" for name in backends],
    )
    figures = verdict.figures(judged.summary)
    crashed = {f"{name}/{w}": c for name, run in runs.items() for w, c in run["crashed_processes"].items()}
    document: dict[str, Any] = {
        "backends": runs,
        "seed": args.seed,
        "duration": args.duration,
        "wall_seconds": round(time.monotonic() - started, 1),
        "processes": sum(run["processes"] for run in runs.values()),
        "violations": judged.violations,
        "violation_details": judged.summary.get("violation_details") or [],
        "figures": figures,
        "report": str(judged.report),
        "analyze_status": judged.analyze_status,
    }
    (args.out / "soak.json").write_text(json.dumps(document, indent=2, default=str) + "\n")
    _print(document, figures)
    if judged.analyze_status not in (0, 3):
        print(
            f"kubecoord-testkit soak: the pipeline failed (exit {judged.analyze_status}):\n{judged.stderr[-3000:]}",
            file=sys.stderr,
        )
        return ERROR
    if judged.violations:
        return VIOLATIONS
    failed = {name: len(run["fault_failures"]) for name, run in runs.items() if run["fault_failures"]}
    if failed:
        print(
            f"kubecoord-testkit soak: faults that could not be injected: {failed} (see {args.out}/*/faults.jsonl)",
            file=sys.stderr,
        )
        return ERROR
    if crashed:
        print(
            f"kubecoord-testkit soak: client processes exited abnormally: {crashed} (see {args.out}/*/stderr)",
            file=sys.stderr,
        )
        for process in crashed:
            name, _, worker = process.partition("/")
            print(_tail(args.out / name / "stderr" / f"{worker}.txt"), file=sys.stderr)
        return ERROR
    return OK


def _tail(path: Path, lines: int = 40) -> str:
    """The end of a client process's stderr (where it hung, when it did not exit)."""
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError as exc:
        return f"--- {path}: {exc}"
    return "\n".join([f"--- the last {len(text)} lines of {path}", *text])


def _print(document: dict[str, Any], figures: dict[str, Any]) -> None:
    from kubecoord_testkit.soak.verdict import format_gaps

    for name, run in document["backends"].items():
        faults = ", ".join(f"{kind} {count}" for kind, count in run["faults"].items())
        print(f"{name}: faults injected ({sum(run['faults'].values())}): {faults}")
        if run["fault_failures"]:
            print(f"{name}: faults that could not be injected: {len(run['fault_failures'])}")
    print(f"leadership changes: {figures['leadership_changes']} ({figures['leadership_terms']} terms)")
    print(f"failover gaps: {format_gaps(figures['failover_gap_seconds'])}")
    print(
        f"KV operations: {figures['kv_operations']} ({figures['kv_conflicts']} conflicts); "
        f"lost updates: {figures['lost_updates']}"
    )
    membership = figures["membership"]
    print(f"membership: {membership['joins']} joins, {membership['leaves']} leaves, {membership['expiries']} expiries")
    print(f"group coordinator: {figures['rebalances']} rebalances; {format_gaps(figures['rebalance_seconds'])}")
    violations = document["violations"]
    verdict = (
        "no safety violations"
        if not violations
        else "SAFETY VIOLATIONS: " + ", ".join(f"{kind} {count}" for kind, count in violations.items())
    )
    print(f"{verdict}; {figures['events']} events from {document['processes']} processes")
    for found in document.get("violation_details", []):
        # The evidence, so that a failing run says what it found without its output folder
        # (a CI run's temporary folder is gone by the time anybody reads its log).
        where = f"{found['primitive']} {found['namespace']}/{found['name']}"
        print(f"  {found['type']} {where} at {found['ts']}: {found['detail']}")
        for line in found.get("evidence") or []:
            source = f"{line.get('file')}:{line.get('line')}"
            print(f"    {line.get('process')} {line.get('event')} at {line.get('ts')} ({source})")
    print(f"report: {document['report']}")
