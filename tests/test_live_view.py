"""The terminal view, seen as a person sees it: bootwatch under a pseudo-terminal."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time

from .conftest import CORPUS, ROOT


def run_in_pty(args: list[str], timeout: float = 60) -> tuple[int, str]:
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "LINES": "40", "TERM": "xterm-256color"}
    proc = subprocess.Popen([sys.executable, "-m", "bootwatch", *args], stdin=slave, stdout=slave, stderr=slave,
                            env=env, cwd=ROOT, close_fds=True)
    os.close(slave)
    out = b""
    deadline = time.time() + timeout
    while time.time() < deadline:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    code = proc.wait(timeout=10)
    return code, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode("utf-8", "replace"))


def test_live_view_shows_phases_progress_and_the_summary() -> None:
    code, screen = run_in_pty(["replay", "--speed", "50", str(CORPUS / "vllm/v0.12-qwen3moe-eager-ready-ansi.log")])
    assert code == 0
    # While it runs: the current phase with its progress counter and the last line.
    assert "> load_weights" in screen and "/16" in screen and "last:" in screen
    # At the end: the summary as `report` prints it.
    assert "READY" in screen and "Application startup complete." in screen
    assert re.search(r"load_weights\s+\S+\s+\d+m\d\ds", screen)
