"""``kubecoord-testkit storm``: two operator replicas through a storm of resource changes
and faults on a whole cluster, every write judged against the operator Lease
(kubecoord_testkit.storm.runner). Exit 3 when a write of a deposed replica was applied
after its successor's first write, a write named the wrong term, or the end state did not
converge."""

from __future__ import annotations

import argparse
import json
import pathlib
import signal
import tempfile
from types import FrameType

from kubecoord.cli.exits import OK, VIOLATIONS
from kubecoord_testkit.storm import runner


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=60.0, help="traffic and faults (default 60)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--names", type=int, default=3, help="names per kind in the traffic's pool (default 3)")
    parser.add_argument("--faults", default="kill,freeze,hold,send-freeze",
                        help=f"in turn, comma-separated, from {','.join(runner.FAULTS)} "
                             "(default kill,freeze,hold,send-freeze)")
    parser.add_argument("--min-faults", type=int, default=0, help="go on past --seconds until this many faults")
    parser.add_argument("--fault-every", type=float, default=12.0, help="seconds between faults (default 12)")
    parser.add_argument("--op-interval", type=float, default=0.25, help="seconds between operations (default 0.25)")
    parser.add_argument("--unfenced", action="store_true",
                        help="the chart with rbac.fenceOperatorWrites=false, replicas without --fence-writes")
    parser.add_argument("--settle", type=float, default=180.0,
                        help="seconds the end state may take (default 180; scaled with the Lease timings "
                             "on a loaded machine)")
    parser.add_argument("--helm", type=pathlib.Path, help="helm binary (default: beside python, .venv/bin, PATH)")
    parser.add_argument("--out", type=pathlib.Path, help="folder for logs and report.json (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the cluster's logs and audit log even when ok")
    parser.add_argument("--until-violation", action="store_true",
                        help="end the storm at the first fault after which a violation shows (a fail-first run)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # the storm's cleanup (servers, replicas) runs on the way out


def run(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, _interrupted)
    options = runner.StormOptions(
        seconds=args.seconds, seed=args.seed, names=args.names, faults=tuple(f for f in args.faults.split(",") if f),
        fault_every=args.fault_every, min_faults=args.min_faults, op_interval=args.op_interval,
        fenced=not args.unfenced, settle=args.settle, helm=args.helm, keep=args.keep,
        until_violation=args.until_violation)
    out = args.out or pathlib.Path(tempfile.mkdtemp(prefix="kubecoord-storm-"))
    out.mkdir(parents=True, exist_ok=True)
    report = runner.run(options, out)
    print(json.dumps(report.figures(), indent=2) if args.json else report.render())
    print(f"logs: {out}")
    return OK if report.ok else VIOLATIONS

