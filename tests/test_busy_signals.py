"""Stop signals are honoured while bootwatch is busy (red-team-3 N16, N17, N18; issue 20 item 4): readers yield
to the event loop between pieces however fast the log grows, a catch-up stops at a signal with the summary of
what was read, `replay FIFO` opens the FIFO once and honours TERM, a locked history does not hold the exit."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bootwatch.pipeline import Analyzer
from bootwatch.tracker.evidence import RUNTIME_KEEP

BOOTWATCH = [sys.executable, "-m", "bootwatch"]
BANNER = b"INFO 11-18 17:10:46 api_server.py:585] vLLM API server version 0.6.4.post1\n"
READY = b"INFO:     Application startup complete.\n"
TRACEBACK = (
    b"ERROR 11-18 17:20:00 engine.py:1] Exception in callback\nTraceback (most recent call last):\n"
    b'  File "/usr/lib/vllm/engine.py", line 10, in step\n    raise ValueError("bad request")\nValueError: bad request\n'
)

# A server that is ready, then writes request tracebacks at RATE MB/s; it notes when SIGINT reached it.
SPEW = r"""
import os, signal, sys, time
def on_int(signum, frame):
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(repr(time.time()))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    os._exit(0)
signal.signal(signal.SIGINT, on_int)
w = sys.stdout.buffer
w.write(%(head)r)
w.flush()
rate = float(sys.argv[2]) * 1e6
block = %(tb)r * 200
t0, n = time.monotonic(), 0
while True:
    w.write(block); w.flush(); n += 1
    d = t0 + n * len(block) / rate - time.monotonic()
    if d > 0:
        time.sleep(d)
"""


def test_ctrl_c_reaches_the_server_at_once_while_it_writes_20_mb_s_of_tracebacks(tmp_path: Path) -> None:
    spew, got = tmp_path / "spew.py", tmp_path / "got"
    spew.write_text(SPEW % {"head": BANNER + READY, "tb": TRACEBACK})
    proc = subprocess.Popen(
        [*BOOTWATCH, "run", "--log", str(tmp_path / "s.log"), "--", sys.executable, str(spew), str(got), "20"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    log = tmp_path / "s.log"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (log.exists() and log.stat().st_size > 1 << 20):
        time.sleep(0.05)  # the server is up, its SIGINT handler in place, and writing (a loaded machine is slow)
    time.sleep(2.0)  # bootwatch falls behind such a writer on this machine: the reader never runs dry
    sent = time.time()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    lag = float(got.read_text()) - sent
    # Measured 0.13-0.17 s on a loaded 2-core machine (bench/signal_lag.py); before, the signal was never acted
    # on and the SIGKILL of a supervisor came first. The bound here leaves room for a slower machine.
    assert lag < 1.0, f"the server got the Ctrl-C {lag:.2f} s after bootwatch did"


def _reading(pid: int, path: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            if any(f.path == str(path) for f in psutil.Process(pid).open_files()):
                return
        time.sleep(0.05)
    raise AssertionError(f"{path} was never opened")


def _holds(pid: int, path: Path) -> bool:
    """The process has `path` open (a FIFO too, which psutil's open_files leaves out)."""
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                    return True
    return False


def _traceback_log(path: Path, mb: int) -> Path:
    path.write_bytes(
        BANNER
        + b"INFO 11-18 17:10:47 model_runner.py:1072] Starting to load model /m...\n"
        + TRACEBACK * (mb * 1_000_000 // len(TRACEBACK))
    )
    return path


@pytest.mark.parametrize(
    "command", [["report", "--json"], ["watch", "--json", "--from-start"]], ids=["report", "watch-from-start"]
)
def test_sigterm_during_a_catch_up_exits_within_a_second_with_the_summary(tmp_path: Path, command: list[str]) -> None:
    log = _traceback_log(tmp_path / "tb.log", 20)
    proc = subprocess.Popen([*BOOTWATCH, *command, str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _reading(proc.pid, log)  # its stop handling is in place once it reads the file
    time.sleep(0.5)
    assert proc.poll() is None, "the catch-up ended before the signal: make the log longer"
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    took = time.monotonic() - sent
    assert proc.returncode == 143, err
    assert took < 1.0, f"exited {took:.2f} s after SIGTERM"
    summary = json.loads(out.strip().splitlines()[-1])
    assert 0 < summary["lines"] < log.read_bytes().count(b"\n"), "the summary covers what was read"


def test_replay_reads_a_fifo_with_one_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "ff"
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [*BOOTWATCH, "replay", "--json", "--speed", "0", str(fifo)], stdout=subprocess.PIPE, text=True
    )
    with open(fifo, "wb") as w:  # one writer, which closes at once
        w.write(BANNER + READY)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and json.loads(out.strip().splitlines()[-1])["verdict"] == "ready"


def test_replay_of_a_fifo_without_a_writer_honours_sigterm(tmp_path: Path) -> None:
    fifo = tmp_path / "ff"
    os.mkfifo(fifo)
    proc = subprocess.Popen([*BOOTWATCH, "replay", "--speed", "0", str(fifo)], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline and not _holds(proc.pid, fifo):
        time.sleep(0.05)
    time.sleep(0.5)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("replay of a FIFO ignored SIGTERM") from None
    assert proc.returncode == 143 and time.monotonic() - sent < 1.0


def test_a_locked_history_does_not_hold_the_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("BOOTWATCH_HOME", str(home))
    log = tmp_path / "r.log"
    log.write_bytes(BANNER + READY)
    subprocess.run([*BOOTWATCH, "watch", "--from-start", str(log)], capture_output=True, timeout=60, check=True)
    db = sqlite3.connect(home / "history.sqlite3", isolation_level=None)
    db.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        p = subprocess.run([*BOOTWATCH, "watch", "--from-start", str(log)], capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started
    finally:
        db.execute("ROLLBACK")
        db.close()
    assert p.returncode == 0 and "not added to the history" in p.stderr
    assert took < 10.0, f"the exit waited {took:.1f} s behind the locked store"


def test_memory_after_ready_is_bounded_whatever_the_log_prints() -> None:
    # Each request traceback after ready was kept as a candidate with its context: ~6 MB per MB of log.
    analyzer = Analyzer(clock="arrival")
    analyzer.feed(BANNER + READY, time.time())
    for _ in range(50):
        analyzer.feed(TRACEBACK * 100, time.time())
    launch = analyzer.tracker.launch
    assert launch is not None and launch.ready is not None
    assert len(launch.candidates) <= RUNTIME_KEEP
