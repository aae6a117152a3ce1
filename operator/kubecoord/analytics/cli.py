"""``kubecoord analyze LOGS... --out DIR``: the pipeline as a command.

Exit status: 0 when no safety violation was found, 3 when some were (so a CI job or a
canary can gate on it), 4 when the input held no event (no file matched, or every
line was malformed), 1 on any other error, 2 on bad arguments (argparse). Progress
goes to stderr, one line per step; the verdict goes to stdout.

pyspark is imported inside run() only: ``kubecoord --help`` starts no JVM.
Under spark-submit the session takes spark-submit's master and settings (see README).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from kubecoord.errors import CoordinationError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_VIOLATIONS = 3
EXIT_EMPTY = 4
DEFAULT_SKEW = 1.0

log = logging.getLogger("kubecoord.analytics")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logs", nargs="+", metavar="LOGS",
                        help="event-log files, directories, globs or URIs (s3a://, hdfs://); .gz is read as gzip")
    parser.add_argument("--out", required=True, type=Path, help="local output directory (replaced when complete)")
    parser.add_argument("--master", help="Spark master URL (default local[*], or spark-submit's)")
    parser.add_argument("--skew-tolerance", type=float, default=DEFAULT_SKEW, metavar="SECONDS",
                        help=f"clock difference between processes to tolerate (default {DEFAULT_SKEW})")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark setting, e.g. spark.driver.memory=4g (repeatable)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def run(args: argparse.Namespace) -> int:
    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"kubecoord analyze: --conf takes KEY=VALUE, got {item!r}", file=sys.stderr)
            return EXIT_ERROR
        conf[key] = value
    if args.skew_tolerance < 0:
        print("kubecoord analyze: --skew-tolerance must not be negative", file=sys.stderr)
        return EXIT_ERROR

    from kubecoord.analytics import output
    from kubecoord.analytics.pipeline import analyze
    from kubecoord.analytics.progress import Progress
    from kubecoord.analytics.reading import EmptyInputError
    from kubecoord.analytics.session import build_session, has_active_session

    progress = Progress("kubecoord analyze", enabled=not args.quiet)
    progress.step("starting Spark")
    owned = not has_active_session()  # an embedding caller's session is not ours to stop
    spark = build_session(master=args.master, conf=conf)
    try:
        analysis = analyze(spark, args.logs, skew=args.skew_tolerance, progress=progress)
        output.write(analysis, args.out, progress=progress)
    except EmptyInputError as exc:
        print(f"kubecoord analyze: empty input: {exc}", file=sys.stderr)
        return EXIT_EMPTY
    except CoordinationError as exc:
        print(f"kubecoord analyze: {exc}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        if owned:
            spark.stop()
    inputs = analysis.summary["inputs"]
    count = analysis.violation_count
    verdict = "no safety violations" if count == 0 else f"{count} SAFETY VIOLATION(S): {_by_type(analysis.summary)}"
    print(
        f"{verdict}; {inputs['events']} events, {inputs['malformed_lines']} malformed line(s); "
        f"report: {args.out / 'report.html'}"
    )
    progress.step("done")
    return EXIT_VIOLATIONS if count else EXIT_OK


def _by_type(summary: dict[str, dict[str, int]]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in summary["violations"].items() if n)
