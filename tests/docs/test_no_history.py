"""The manual and the docstrings state what the code does, not the history of the work:
no issue numbers, no "the Nth session" or "the fifth pass", no "was tried". History
belongs in CHANGELOG.md and git. A session alone is a ZooKeeper or Spark session, and an
upstream project's issue may be cited by the project's name (``kazoo issue #769``)."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
LATER = ("third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|"
         "sixteenth|seventeenth|eighteenth|nineteenth|twentieth")
NARRATION = re.compile(
    rf"\bissues? #?\d+|\b(?:second|{LATER}) session\b|\b(?:{LATER}) pass\b"
    r"|\b(?:was|were) tried\b|\bwe tried\b|\bbefore this (?:change|session|build)\b",
    re.IGNORECASE,
)
UPSTREAM = re.compile(r"\b(kazoo|kopf|client-go|kubernetes|spark|cassandra|etcd|helm) issues? #?\d+", re.IGNORECASE)


def _files() -> list[pathlib.Path]:
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "examples").rglob("*.md")]
    code = [*(ROOT / "operator" / "kubecoord").rglob("*.py"), *(ROOT / "testkit" / "src").rglob("*.py"),
            *(ROOT / "charts").rglob("*.py"), *(ROOT / "charts").rglob("*.yaml"), *(ROOT / "bench").rglob("*.py")]
    return sorted(pages + code)


def test_pages_and_docstrings_do_not_narrate_history() -> None:
    found = []
    for path in _files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if NARRATION.search(line) and not UPSTREAM.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert not found, "history belongs in CHANGELOG.md:\n" + "\n".join(found)


def test_the_check_catches_narration() -> None:
    for line in ("closed in the nineteenth session", "issue 23's profile", "(issue 21: one POST)",
                 "what was tried", "before this change"):
        assert NARRATION.search(line), line
    assert UPSTREAM.search("kazoo issue #769")
