"""``kubecoord analyze LOGS... --out DIR``: the pipeline as a command.

Exit status: 0 when no safety violation was found, 3 when some were (so a CI job or a
canary can gate on it), 4 when the input held no event or a pattern matched no file,
8 when more than --max-malformed of the lines were malformed (the verdict would rest on
too little of the log: this wins over 0 and 3, and the output is still written), 1 on
any other error, 2 on bad arguments (argparse). Progress goes to stderr, one line per
step; the verdict goes to stdout.

pyspark is imported inside run() only: ``kubecoord --help`` starts no JVM.
Under spark-submit the session takes spark-submit's master and settings (see docs/pipeline.md).
"""

from __future__ import annotations

import argparse
import logging
import sys

from kubecoord.errors import CoordinationError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_VIOLATIONS = 3
EXIT_EMPTY = 4
EXIT_MALFORMED = 8  # its own status: 7 is permission denied (kubecoord.cli.exits.MEANINGS)
DEFAULT_SKEW = 1.0
DEFAULT_MAX_MALFORMED = 0.01

log = logging.getLogger("kubecoord.analytics")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logs", nargs="+", metavar="LOGS",
                        help="event-log files, directories, globs or URIs (s3a://, hdfs://); .gz is read as gzip")
    parser.add_argument("--out", required=True,
                        help="output directory, local or any Hadoop URI (hdfs://, s3a://); replaced when complete: "
                        "summary.json, report.html and Parquet tables/{violations,intervals,metrics,input_problems}, "
                        "each row's type naming what it is (analytics.layout)")
    parser.add_argument("--master", help="Spark master URL (default local[*], or spark-submit's)")
    parser.add_argument("--skew-tolerance", type=float, default=DEFAULT_SKEW, metavar="SECONDS",
                        help=f"clock difference between processes to tolerate (default {DEFAULT_SKEW})")
    parser.add_argument("--max-malformed", type=float, default=DEFAULT_MAX_MALFORMED, metavar="FRACTION",
                        help=f"largest share of malformed lines before exit {EXIT_MALFORMED} "
                             f"(default {DEFAULT_MAX_MALFORMED}, i.e. 1%%)")
    parser.add_argument("--faults", action="append", default=[], metavar="FILE",
                        help="a soak's faults.jsonl: its faults are drawn on the report's timelines (repeatable)")
    parser.add_argument("--max-line-bytes", type=int, default=1 << 20, metavar="BYTES",
                        help="longest valid line (default 1 MiB); a longer one counts as malformed, with its "
                             "file and line, and is never parsed")
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
    if not 0 <= args.max_malformed <= 1:
        print("kubecoord analyze: --max-malformed is a fraction between 0 and 1", file=sys.stderr)
        return EXIT_ERROR

    from kubecoord.analytics import output
    from kubecoord.analytics.faults import read_faults
    from kubecoord.analytics.pipeline import analyze
    from kubecoord.analytics.progress import Progress
    from kubecoord.analytics.reading import EmptyInputError, UnmatchedInputError
    from kubecoord.analytics.session import command_session

    try:
        faults = read_faults(args.faults)
    except CoordinationError as exc:
        print(f"kubecoord analyze: {exc}", file=sys.stderr)
        return EXIT_ERROR
    progress = Progress("kubecoord analyze", enabled=not args.quiet)
    progress.step("starting Spark")
    try:
        with command_session(master=args.master, conf=conf) as spark:
            # Each step names the Spark jobs it runs (the job description), so an event log
            # (spark.eventLog.enabled) can be read per step: bench/bench_pipeline.py does.
            progress.listener = spark.sparkContext.setJobDescription
            try:
                analysis = analyze(spark, args.logs, skew=args.skew_tolerance, progress=progress,
                                   max_line_bytes=args.max_line_bytes)
                analysis.faults = faults
                output.write(analysis, args.out, progress=progress, spark=spark)
            finally:
                progress.listener = None  # the session's jobs are done; "done" names none
    except EmptyInputError as exc:
        print(f"kubecoord analyze: empty input: {exc}", file=sys.stderr)
        return EXIT_EMPTY
    except UnmatchedInputError as exc:
        print(f"kubecoord analyze: {exc}", file=sys.stderr)
        return EXIT_EMPTY
    except CoordinationError as exc:
        print(f"kubecoord analyze: {exc}", file=sys.stderr)
        return EXIT_ERROR
    inputs = analysis.summary["inputs"]
    count = analysis.violation_count
    verdict = "no safety violations" if count == 0 else f"{count} SAFETY VIOLATION(S): {_by_type(analysis.summary)}"
    unreadable = len(inputs["unreadable_files"])
    print(
        f"{verdict}; {inputs['events']} events, {inputs['malformed_lines']} malformed line(s), "
        f"{unreadable} unreadable file(s); report: {output.display(args.out, 'report.html')}"
    )
    undecided = analysis.summary["leadership"]["undecided_overlaps"]
    if undecided:
        print(f"{undecided} overlap(s) within the clock uncertainty: the log cannot tell a split brain from clock "
              "skew there (summary.json leadership.undecided_overlap_examples)")
    for item in inputs["unreadable_files"]:
        print(f"kubecoord analyze: unreadable file {item['file']}: {item['reason']}", file=sys.stderr)
    progress.step("done")
    share = analysis.malformed_share
    if share > args.max_malformed:
        print(
            f"kubecoord analyze: {share:.1%} of the lines are malformed (more than --max-malformed "
            f"{args.max_malformed:.1%}): the verdict covers too little of the log; see the rows of type "
            "malformed_lines in the input_problems table",
            file=sys.stderr,
        )
        return EXIT_MALFORMED
    return EXIT_VIOLATIONS if count else EXIT_OK


def _by_type(summary: dict[str, dict[str, int]]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in summary["violations"].items() if n)
