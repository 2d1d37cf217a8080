"""The live view on a real terminal of 80x24 (tmux), as a person sees it: the clock moves while the server is
silent, a phase with progress has a bar, and what `--then` prints stays on the screen with the verdict."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (scripts/test installs it)")

EXAMPLE = ROOT / "examples" / "sglang-eagle2-ready.log"


class Tmux:
    """A tmux server of its own (its own socket): its size is the one asked for, whatever else runs."""

    def __init__(self, command: str, width: int = 80, height: int = 24) -> None:
        self.name = f"bw-{uuid.uuid4().hex[:8]}"
        command = f"unset COLUMNS LINES; {command}"  # the size is the pane's, not what the caller had
        subprocess.run(
            [
                "tmux",
                "-L",
                self.name,
                "new-session",
                "-d",
                "-x",
                str(width),
                "-y",
                str(height),
                "-s",
                self.name,
                command,
            ],
            check=True,
            timeout=10,
        )

    def screen(self, scrollback: int = 0) -> str:
        return subprocess.run(
            ["tmux", "-L", self.name, "capture-pane", "-p", "-S", str(-scrollback), "-t", self.name],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout

    def wait_for(self, pattern: str, timeout: float = 30) -> str:
        deadline = time.time() + timeout
        while time.time() < deadline:
            screen = self.screen()
            if re.search(pattern, screen):
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{pattern!r} never on screen:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.name, "kill-server"], capture_output=True, timeout=10)


def _elapsed(screen: str) -> float:
    number, unit = re.findall(r"elapsed (\d+(?:\.\d+)?) (m?s)", screen)[-1]
    return float(number) / (1000 if unit == "ms" else 1)


def test_live_view_at_80x24_ticks_draws_bars_and_keeps_then_output(tmp_path: Path) -> None:
    lines = EXAMPLE.read_bytes().splitlines(keepends=True)
    capture = next(i for i, line in enumerate(lines) if b"Capture cuda graph begin" in line)
    log = tmp_path / "server.log"
    log.write_bytes(b"".join(lines[: capture + 1]))
    done = tmp_path / "done"
    command = (
        f"{sys.executable} -m bootwatch watch {log} --from-start --stall 120s --then 'echo MARKER-FROM-THEN'; "
        f"touch {done}; sleep 60"
    )
    t = Tmux(f"cd {ROOT} && {command}")
    try:
        t.wait_for(r"> cuda_graph")
        with log.open("ab") as f:  # the capture gets half way, then the server says nothing for a while
            f.write(
                b"\r  3%|\xe2\x96\x8e         | 1/34 [00:01<00:43,  1.30s/it]\r 50%|     | 17/34 [00:04<00:04,  4.18it/s]\n"
            )
        first = t.wait_for(r"17/34")
        assert "━" in first, first  # the bar of the phase under way
        assert all(len(row) <= 80 for row in first.splitlines())
        assert re.search(r"load_weights\s+\d+(\.\d)? m?s", first), first  # done phases keep their durations
        time.sleep(2.5)
        second = t.screen()
        assert _elapsed(second) >= _elapsed(first) + 1.5, (first, second)
        with log.open("ab") as f:
            f.write(b"".join(lines[capture + 1 :]))
        deadline = time.time() + 30
        while not done.exists() and time.time() < deadline:
            time.sleep(0.1)
        final = t.screen()
        assert "MARKER-FROM-THEN" in final, final
        assert re.search(r"^READY\s+SGLang", final, re.M), final
        # The command's output is below the summary, not drawn over by the view.
        assert final.index("MARKER-FROM-THEN") < final.rindex("READY")
    finally:
        t.close()


def test_a_terminal_too_small_for_the_view_gets_plain_lines(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(EXAMPLE.read_bytes())
    done = tmp_path / "done"
    t = Tmux(f"cd {ROOT} && {sys.executable} -m bootwatch watch {log} --from-start; touch {done}; sleep 60", width=50)
    try:
        deadline = time.time() + 30
        while not done.exists() and time.time() < deadline:
            time.sleep(0.1)
        screen = t.screen(scrollback=500)
        assert "phase cuda_graph  (line 13)" in screen, screen  # the plain sink's lines, not a box cut short
        assert "╭" not in screen
    finally:
        t.close()
