"""The Python API and the pytest plugin stop the server as `bootwatch run` does under every repeat of
Ctrl-C or cancellation (red-team-3 N1), and a user sink whose close() raises leaves no server running (N6)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from .conftest import ROOT

# A server that takes 3 s over a Ctrl-C and has a worker that ignores SIGINT (it leaves shutdown to its
# parent and dies on SIGTERM): only a stop that goes on to SIGTERM leaves nothing behind.
SERVER = """
import os, signal, subprocess, sys, time
c = subprocess.Popen([sys.executable, "-c",
    "import signal,time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(3600)"])
open(sys.argv[1], "w").write(f"{os.getpid()} {c.pid}")
signal.signal(signal.SIGINT, lambda *a: (time.sleep(3), os._exit(0)))
print("INFO 11-18 17:10:46 api_server.py:585] vLLM API server version 0.6.4.post1", flush=True)
print("INFO:     Application startup complete.", flush=True)
time.sleep(3600)
"""

SYNC = """
import sys, time, bootwatch
with bootwatch.launch([sys.executable, {server!r}, {pids!r}], timeout=60, log_dir={dir!r}) as s:
    print("ready", flush=True)
    time.sleep(60)
"""

ASYNC = """
import asyncio, sys, bootwatch
async def main():
    async with bootwatch.launch([sys.executable, {server!r}, {pids!r}], timeout=60, log_dir={dir!r}):
        print("ready", flush=True)
        await asyncio.sleep(60)
asyncio.run(main())
"""

CANCEL = """
import asyncio, os, sys, bootwatch
async def main():
    async def body():
        async with bootwatch.launch([sys.executable, {server!r}, {pids!r}], timeout=60, log_dir={dir!r}):
            print("ready", flush=True)
            await asyncio.sleep(60)
    task = asyncio.ensure_future(body())
    while not (os.path.exists({pids!r}) and open({pids!r}).read().strip()):
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.5)
    task.cancel()
    await asyncio.sleep(1.0)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
asyncio.run(main())
"""

PLUGIN_TEST = """
import sys, time
def test_serves(bootwatch_server):
    bootwatch_server([sys.executable, {server!r}, {pids!r}], timeout="60s")
    print("ready", flush=True)
    time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_pids(path: Path, timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().split()) == 2:
            return [int(p) for p in path.read_text().split()]
        time.sleep(0.05)
    raise AssertionError("the stand-in server never started")


def _run_script(tmp_path: Path, code: str, argv: list[str] | None = None) -> tuple[subprocess.Popen[str], list[int]]:
    server, pids = tmp_path / "srv.py", tmp_path / "pids"
    server.write_text(SERVER)
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(code.format(server=str(server), pids=str(pids), dir=str(tmp_path))))
    proc = subprocess.Popen(
        argv or [sys.executable, str(script)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    return proc, _wait_pids(pids)


def _nothing_left(proc: subprocess.Popen[str], pids: list[int]) -> None:
    _, err = proc.communicate(timeout=60)
    deadline = time.monotonic() + 2.0  # well inside the guard's 5 s grace: the stop itself must have done it
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    left = [p for p in pids if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"left running after the program ended: {left}\n{err[-2000:]}"
    assert "Task was destroyed but it is pending" not in err, err[-2000:]


def _ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "ready" in line, line


@pytest.mark.parametrize("code", [SYNC, ASYNC], ids=["with", "async-with"])
def test_two_ctrl_c_in_the_block_stop_the_whole_server(tmp_path: Path, code: str) -> None:
    proc, pids = _run_script(tmp_path, code)
    _ready(proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _nothing_left(proc, pids)


@pytest.mark.parametrize("code", [SYNC, ASYNC], ids=["with", "async-with"])
def test_two_ctrl_c_during_startup_stop_the_whole_server(tmp_path: Path, code: str) -> None:
    slow = code.replace("timeout=60", "timeout=60, url='http://127.0.0.1:9/never'")  # never ready
    proc, pids = _run_script(tmp_path, slow)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _nothing_left(proc, pids)


def test_two_cancellations_stop_the_whole_server(tmp_path: Path) -> None:
    proc, pids = _run_script(tmp_path, CANCEL)
    _nothing_left(proc, pids)


def test_the_pytest_plugin_under_two_ctrl_c(tmp_path: Path) -> None:
    proc, pids = _run_script(
        tmp_path,
        PLUGIN_TEST,
        argv=[sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(tmp_path / "user.py")],
    )
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _nothing_left(proc, pids)


SINK = """
import sys, time, bootwatch
class Bad:
    def note(self, now, text): pass
    def event(self, ev, now): pass
    def close(self, summary, now): raise RuntimeError("sink close failed")
try:
    bootwatch.launch([sys.executable, {server!r}, {pids!r}], timeout=60, log_dir={dir!r}, sinks=[Bad()]).__enter__()
except RuntimeError as e:
    print("raised", e, flush=True)
time.sleep(60)
"""


def test_a_sink_whose_close_raises_leaves_no_server_running(tmp_path: Path) -> None:
    proc, pids = _run_script(tmp_path, SINK)
    try:
        assert proc.stdout is not None
        assert "raised sink close failed" in proc.stdout.readline()
        assert not any(_alive(p) for p in pids), "the server runs on in a live process"
    finally:
        proc.kill()
        proc.communicate()
