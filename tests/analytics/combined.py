"""One analysis for the hand-written histories of several modules, each module's share a part.

An analysis's time here is Spark's fixed cost, not the history's: 10-30 s of jobs for a
few dozen events, hardly more for a few hundred. So a module whose history is judged at
a skew tolerance other modules use too declares it as a part, at import:

    PART = combined.part("create-races", skew=0.0, build=_history)   # build(root) -> logs

and its module fixture (``analysis = combined.module_fixture(PART)``) asks the session's
``combined_analyses`` (tests/analytics/conftest.py) for it: the first test that
needs a tolerance's analysis writes every part declared with it (each under a folder of
its own) and analyses them together, once per process (per xdist worker, over the shared
Spark session); every later module of that tolerance reads the same analysis. A test run
of one module analyses that module's part alone.

What makes a part's verdicts those of an analysis of its part alone, checked here before
analysing: no two parts of one analysis share a namespace or a process. Every check of
the pipeline is keyed by namespace and name, clock evidence pairs events of one
namespace only, and a process's clock offset is estimated within its connected group
of processes; the one outcome of the clock estimate that reaches across groups,
evidence contradicting itself (``inconsistent_evidence``: all evidence dropped), is
checked absent afterwards. Global figures of the summary (counts, the largest skews)
are the whole analysis's: a test reads its part through ``Parted``, whose tables hold
its namespaces' rows only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kubecoord.analytics.pipeline import Analysis, analyze
from tests.fixtures.spark import is_current

from .histories import Log


@dataclass(frozen=True)
class Part:
    name: str
    """Unique among the parts; the folder its files are written to."""
    skew: float
    build: Callable[[Path], Iterable[Log]] = field(compare=False)
    """Given its folder, the part's logs (written by the analysis, not by build)."""


_DECLARED: dict[str, Part] = {}


def part(name: str, *, skew: float, build: Callable[[Path], Iterable[Log]]) -> Part:
    """Declares a part of the analysis at ``skew`` (call it at import)."""
    declared = Part(name, skew, build)
    assert _DECLARED.setdefault(name, declared) == declared, f"two parts named {name!r}"
    return _DECLARED[name]


def module_fixture(wanted: Part) -> Any:
    """A module-scoped fixture giving ``wanted``'s view of its analysis
    (``analysis = module_fixture(PART)`` in the module)."""

    @pytest.fixture(scope="module")
    def analysis(spark: Any, combined_analyses: CombinedAnalyses) -> Parted:
        return combined_analyses.of(wanted, spark)

    return analysis


@dataclass(frozen=True)
class Parted:
    """One part's view of a combined analysis."""

    analysis: Analysis
    namespaces: tuple[str, ...]
    processes: tuple[str, ...]

    @property
    def summary(self) -> dict[str, Any]:
        """The whole analysis's summary: its global figures count every part."""
        return self.analysis.summary

    def table(self, name: str) -> Any:
        """The analysis's table ``name``, its rows of this part's namespaces only."""
        from pyspark.sql import functions as F

        return self.analysis.tables[name].filter(F.col("namespace").isin(list(self.namespaces)))


@dataclass
class _Analysed:
    spark: Any
    analysis: Analysis
    parts: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]
    """Each part's namespaces and processes."""


class CombinedAnalyses:
    """The combined analyses of one test process, one per skew tolerance, made on first use."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.made: dict[float, _Analysed] = {}
        self.count = 0

    def of(self, wanted: Part, spark: Any) -> Parted:
        done = self.made.get(wanted.skew)
        if done is None or done.spark is not spark or wanted.name not in done.parts:
            # Not yet made, or made on a Spark session whose JVM has since been replaced.
            done = self._analyse(wanted.skew, spark)
        namespaces, processes = done.parts[wanted.name]
        return Parted(done.analysis, namespaces, processes)

    def _analyse(self, skew: float, spark: Any) -> _Analysed:
        self.count += 1
        root = self.root / f"skew-{skew}-{self.count}"
        parts = sorted((p for p in _DECLARED.values() if p.skew == skew), key=lambda p: p.name)
        owner: dict[tuple[str, str], str] = {}
        names: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        for each in parts:
            folder = root / each.name
            folder.mkdir(parents=True)
            logs = list(each.build(folder))
            for log in logs:
                assert log.path.parent == folder and log.path.name.endswith(".jsonl"), log.path
                log.write()
            namespaces = tuple(sorted({log.namespace for log in logs}))
            processes = tuple(sorted({log.process for log in logs}))
            for key in [("namespace", n) for n in namespaces] + [("process", p) for p in processes]:
                other = owner.setdefault(key, each.name)
                assert other == each.name, f"parts {other} and {each.name} share the {key[0]} {key[1]!r}"
            names[each.name] = (namespaces, processes)
        analysis = analyze(spark, [str(root / each.name / "*.jsonl") for each in parts], skew=skew)
        if len(parts) > 1:
            assert not analysis.summary["clocks"]["inconsistent_evidence"], (
                "the parts' clock evidence contradicts itself: analyse them apart", analysis.summary["clocks"])
        old = self.made.pop(skew, None)
        if old is not None and is_current(old.spark):
            old.analysis.close()
        self.made[skew] = _Analysed(spark, analysis, names)
        return self.made[skew]

    def close(self) -> None:
        """Releases the analyses made on the running JVM (one made on a JVM that was since
        replaced, as tests/analytics/test_shared_session.py replaces it, has nothing left)."""
        for done in self.made.values():
            if is_current(done.spark):
                done.analysis.close()
        self.made.clear()

