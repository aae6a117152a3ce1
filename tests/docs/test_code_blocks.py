"""Every fenced block of the README and the docs site that claims to run does (see
tests/docs/blocks.py for what claims to run and how a page says otherwise). ``python``
blocks run in a fresh interpreter and must exit 0; a following ``<!-- output -->`` block
is what they must print. ``bash`` blocks run only on the getting-started page (its own
test, on a whole cluster); anywhere else they must say why they are not run."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from tests.docs.blocks import Block, blocks

ROOT = pathlib.Path(__file__).resolve().parents[2]
OWN_TEST = {ROOT / "docs" / "getting-started.md"}  # tests/docs/test_getting_started.py
PAGES = sorted({ROOT / "README.md", *(ROOT / "docs").rglob("*.md")} - OWN_TEST)


def _python_blocks() -> list[tuple[Block, Block | None]]:
    found = []
    for page in PAGES:
        page_blocks = blocks(page)
        for index, block in enumerate(page_blocks):
            if block.claims_to_run and block.lang == "python":
                following = page_blocks[index + 1] if index + 1 < len(page_blocks) else None
                found.append((block, following if following and "output" in following.directives else None))
    return found


def test_pages_are_found() -> None:
    assert ROOT / "README.md" in PAGES and len(PAGES) > 5


@pytest.mark.parametrize(("block", "output"), _python_blocks(), ids=lambda value: str(value) if value else "")
def test_python_blocks_run(block: Block, output: Block | None, tmp_path: pathlib.Path) -> None:
    result = subprocess.run([sys.executable, "-c", block.code], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, f"{block}: {result.stderr[-3000:]}"
    if output is not None:
        assert result.stdout.splitlines() == output.code.splitlines(), f"{block} printed:\n{result.stdout}"


def test_blocks_that_are_not_run_say_why() -> None:
    unexplained = []
    for page in PAGES:
        for block in blocks(page):
            if block.lang == "bash" and block.claims_to_run:
                unexplained.append(f"{block}: bash blocks run only in getting-started.md; say <!-- not run: why -->")
            if "not run" in block.directives and len(block.directives["not run"]) < 10:
                unexplained.append(f"{block}: <!-- not run: REASON --> needs a reason")
    assert not unexplained, unexplained
