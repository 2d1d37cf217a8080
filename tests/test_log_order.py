"""A log exported newest first (Google Cloud Logging, `journalctl -r`) is read from its last line up: the same
verdict, cause and ready line as the log written oldest first, at the file's own line numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from bootwatch import log_order
from bootwatch.pipeline import analyze_path, year_of

from .conftest import CORPUS

# Real logs with stamps on their lines: a failure (cause after a traceback), a ready vLLM, a ready Ollama.
LOGS = [
    "vllm/v0.23-metal-plugin-macos-model-path-missing-hfvalidationerror",
    "vllm/v0.10.0-v1-no-prefix-qwen3-4b-modelscope-path-ready-serving",
    "ollama/v0.21.2-windows-cpu-only-16gb-empty-store-pull-then-load-runner-started-4s-ready",
]


def _reversed_copy(src: Path, dst: Path) -> int:
    lines = src.read_bytes().split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    dst.write_bytes(b"\n".join(reversed(lines)) + b"\n")
    return len(lines)


@pytest.mark.parametrize("name", LOGS)
def test_a_log_turned_newest_first_tells_the_same_story(name: str, tmp_path: Path) -> None:
    src = CORPUS / f"{name}.log"
    dst = tmp_path / "newest-first.log"
    n = _reversed_copy(src, dst)
    assert not log_order.newest_first(src.read_bytes()[: log_order.HEAD], year_of(src))
    assert log_order.newest_first(dst.read_bytes()[: log_order.HEAD], year_of(src))
    want, got = analyze_path(src), analyze_path(dst)
    assert got["newest_first"] is True and "newest_first" not in want
    assert (got["verdict"], got["engine"]) == (want["verdict"], want["engine"])
    for part in ("failure", "ready"):
        if want[part] is None:
            assert got[part] is None
            continue
        assert got[part]["text"] == want[part]["text"]
        assert got[part]["line_no"] == n + 1 - want[part]["line_no"]  # the file's numbering, counted from its top


def test_lines_with_one_stamp_or_none_are_read_as_written(tmp_path: Path) -> None:
    same = tmp_path / "same.log"
    same.write_text("".join(f"Mar 27 15:49:20 host ollama[1]: line {i}\n" for i in range(20)))
    assert not log_order.newest_first(same.read_bytes(), 2025)
    assert not log_order.newest_first(b"no stamps here\n" * 50, 2025)
