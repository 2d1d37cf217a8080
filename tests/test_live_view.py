"""The terminal view, seen as a person sees it: bootwatch under a pseudo-terminal."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from .conftest import CORPUS, HELPER, ROOT

CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Pty:
    """bootwatch on a pseudo-terminal; what it drew so far, read while it runs."""

    def __init__(self, args: list[str]) -> None:
        self.master, slave = pty.openpty()
        env = {**os.environ, "COLUMNS": "120", "LINES": "40", "TERM": "xterm-256color"}
        env.pop("NO_COLOR", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bootwatch", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=ROOT,
            close_fds=True,
        )
        os.close(slave)
        self.raw = b""
        self.closed = False

    def read(self, seconds: float) -> None:
        """Take what it draws for `seconds` (less if it exits)."""
        deadline = time.time() + seconds
        while not self.closed and time.time() < deadline:
            r, _, _ = select.select([self.master], [], [], 0.1)
            if r:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    self.closed = True
                self.raw += chunk
            elif self.proc.poll() is not None:
                self.closed = True

    def read_until(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = re.search(pattern, self.screen)
            if m:
                return m
            if self.closed:
                break
            self.read(0.2)
        raise AssertionError(f"{pattern!r} never shown; the screen:\n{self.screen[-3000:]}")

    @property
    def screen(self) -> str:
        return CSI.sub("", self.raw.decode("utf-8", "replace"))

    def finish(self, timeout: float = 60) -> int:
        self.read(timeout)
        os.close(self.master)
        return self.proc.wait(timeout=10)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


def run_in_pty(args: list[str], timeout: float = 60) -> tuple[int, str]:
    p = Pty(args)
    try:
        code = p.finish(timeout)
    finally:
        p.kill()
    return code, p.screen


def test_live_view_shows_phases_progress_and_the_summary() -> None:
    code, screen = run_in_pty(["replay", "--speed", "50", str(CORPUS / "vllm/v0.12-qwen3moe-eager-ready-ansi.log")])
    assert code == 0
    # While it runs: the current phase with its progress counter and the last line.
    assert "> load_weights" in screen and "/16" in screen and "last:" in screen
    # At the end: the summary as `report` prints it.
    assert "READY" in screen and "Application startup complete." in screen
    assert re.search(r"load_weights\s+\S+\s+\d+m\d\ds", screen)


def _elapsed(screen: str) -> float:
    values = re.findall(r"elapsed (\d+(?:\.\d+)?) (m?s)", screen)
    assert values, screen[-2000:]
    number, unit = values[-1]
    return float(number) / (1000 if unit == "ms" else 1)


def test_the_clock_ticks_while_the_server_is_silent(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("INFO 04-27 15:04:49 [api_server.py:1772] vLLM API server version 0.12.0\n")
    p = Pty(["watch", str(log), "--timeout", "60", "--stall", "60"])
    try:
        p.read_until(r"elapsed \d")
        p.read(0.5)
        first = _elapsed(p.screen)
        p.read(3.0)  # the log says nothing more meanwhile
        second = _elapsed(p.screen)
        assert second >= first + 1.0, (first, second)
        p.proc.send_signal(signal.SIGINT)
        assert p.finish(30) == 130
    finally:
        p.kill()


def test_a_ready_banner_with_the_ready_line_and_time_to_ready() -> None:
    code, screen = run_in_pty(["replay", "--speed", "0", str(CORPUS / "vllm/v0.12-qwen3moe-eager-ready-ansi.log")])
    assert code == 0
    banner = screen[screen.rindex("READY after") :]
    assert re.match(r"READY after 4m5\ds", banner), banner[:200]  # the launch's own time, from its phases
    assert "line 90: Application startup complete." in banner


def test_a_failed_banner_with_the_root_cause() -> None:
    code, screen = run_in_pty(
        ["replay", "--speed", "0", str(CORPUS / "sglang/rocm-rdna4-tp2-oom-during-weight-load-one-rank.log")]
    )
    assert code == 1
    banner = screen[screen.rindex("FAILED (") :]
    assert re.match(r"FAILED \(line \d+, oom\): torch\.OutOfMemoryError: CUDA out of memory", banner), banner[:300]


def test_the_banner_shows_the_verify_latency(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "server.log"
    server = [
        sys.executable,
        str(HELPER),
        str(CORPUS / "vllm/v0.11-elloraa-gloo-ready.log"),
        "--port",
        str(port),
        "--then",
        "serve",
    ]
    code, screen = run_in_pty(
        [
            "run",
            "--log",
            str(log),
            "--url",
            f"http://127.0.0.1:{port}/health",
            "--verify",
            "--then",
            "true",
            "--timeout",
            "60",
            "--",
            *server,
        ]
    )
    assert code == 0, screen[-2000:]
    assert re.search(r"READY after [^\n]*verify: one completion in \d+(\.\d)? m?s", screen), screen[-2000:]
