"""The README is a user's path, and what it shows is what bootwatch prints (tests/readme_examples.py)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from .readme_examples import DOCS, ROOT, _in_order, blocks, fresh, normalise

WITH_EXAMPLES = [p for p in DOCS if blocks(p)]


@pytest.mark.parametrize("path", WITH_EXAMPLES, ids=[p.name for p in WITH_EXAMPLES])
def test_examples_are_what_bootwatch_prints(path: Path) -> None:
    if any(b.kind == "screen" for b in blocks(path)) and shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (scripts/test installs it)")
    demo, home, tmp = fresh()
    with tmp:
        for block, out in _in_order(blocks(path), demo, home):
            assert normalise(out) == normalise(block.output), (
                f"{block.name} drifted (scripts/readme-examples --write updates it):\n{out}"
            )


def test_the_readme_is_short_and_has_examples() -> None:
    lines = (ROOT / "README.md").read_text("utf-8").splitlines()
    assert len(lines) <= 300, len(lines)
    assert len(blocks(ROOT / "README.md")) >= 4


def test_no_link_leaves_the_repository() -> None:
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    for path in DOCS:
        text = path.read_text("utf-8")
        assert "../shared" not in text, path
        for target in link.findall(text):
            if re.match(r"[a-z]+://", target):
                continue
            assert (path.parent / target).resolve().is_relative_to(ROOT), (path, target)
            assert (path.parent / target).exists(), (path, target)
