"""The Python API (bootwatch.launch / watch / analyze) against real processes: the stand-in server playing
real recorded logs (ready, OOM, SIGKILL, hang), a process that never prints, and llama-server itself."""

from __future__ import annotations

import asyncio
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

import bootwatch
from bootwatch import ServerFailed, ServerStalled, ServerTimeout, UsageError
from bootwatch.tracker import Event, PhaseEvent, ReadyEvent

from .conftest import CORPUS, HELPER, ROOT

READY_VLLM = CORPUS / "vllm/v0.11-elloraa-gloo-ready.log"
FAILED_SGLANG = CORPUS / "sglang/rocm-rdna4-tp2-oom-during-weight-load-one-rank.log"
READY_SGLANG = CORPUS / "sglang/docs-2025-05-no-tp0-prefix-ready.log"


def fake(log: Path, *extra: str) -> list[str]:
    return [sys.executable, str(HELPER), str(log), *extra]


def gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.time() + within_s
    while time.time() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_launch_ready_then_stopped_on_exit(tmp_path: Path) -> None:
    seen: list[str] = []
    with bootwatch.launch(
        fake(READY_VLLM, "--then", "serve"), log=tmp_path / "s.log", on_event=lambda ev: seen.append(ev.kind)
    ) as server:
        assert server.alive() and server.report.verdict == "ready" and server.summary["engine"] == "vllm"
        assert server.log_path == tmp_path / "s.log" and server.report.phase == "ready"
        assert server.report.time_to_ready_s is not None
        pid = server.pid
        assert psutil.Process(pid).is_running()
    assert gone(pid) and not server.alive()
    assert "phase" in seen and "ready" in seen
    assert b"Application startup complete" in (tmp_path / "s.log").read_bytes()


def test_launch_failure_raises_server_failed_with_root_cause_phase_and_log(tmp_path: Path) -> None:
    with (
        pytest.raises(ServerFailed) as info,
        bootwatch.launch(fake(FAILED_SGLANG, "--then", "exit:1"), log_dir=tmp_path),
    ):
        pytest.fail("a failed start must not enter the block")
    e = info.value
    assert e.category == "oom" and e.root_cause is not None and "out of memory" in e.root_cause.lower()
    assert e.phase == "load_weights" and e.log_path is not None and e.log_path.parent == tmp_path
    assert e.root_cause in str(e) and str(e.log_path) in str(e)
    details = e.details()
    assert e.root_cause in details and "<- died here" in details and "load_weights" in details


def test_launch_sigkill_is_a_failure_that_says_so(tmp_path: Path) -> None:
    with (
        pytest.raises(ServerFailed) as info,
        bootwatch.launch(fake(READY_SGLANG, "--lines", "12", "--then", "kill"), log_dir=tmp_path),
    ):
        pass
    assert info.value.category == "killed" and "SIGKILL" in (info.value.root_cause or "")


def test_launch_silence_is_a_stall_and_the_server_is_stopped(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    with (
        pytest.raises(ServerStalled) as info,
        bootwatch.launch(
            fake(READY_SGLANG, "--lines", "3", "--then", "hang", "--pidfile", str(pidfile)), log_dir=tmp_path, stall=1
        ),
    ):
        pass
    assert info.value.report.verdict == "stalled"
    assert all(gone(int(p)) for p in pidfile.read_text().split())


def test_launch_timeout_while_still_talking(tmp_path: Path) -> None:
    # A server that keeps printing is not stalled: only the timeout ends it.
    chatter = [
        sys.executable,
        "-c",
        "import time\nwhile True:\n    print('still loading', flush=True); time.sleep(0.2)",
    ]
    start = time.time()
    with pytest.raises(ServerTimeout), bootwatch.launch(chatter, log_dir=tmp_path, timeout=2, stall=60):
        pass
    assert time.time() - start < 30


def test_bad_arguments_are_usage_errors_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        bootwatch.launch([])
    with pytest.raises(UsageError):
        bootwatch.launch(["x"], url="ftp://nowhere")
    with pytest.raises(UsageError):
        bootwatch.launch(["x"], timeout="soon")
    with pytest.raises(UsageError), bootwatch.launch(["/nonexistent/server"], log=tmp_path / "x.log"):
        pass
    assert not (tmp_path / "x.log").exists()  # nothing started, nothing left


@pytest.mark.parametrize(
    "cmd, options",
    [
        ("python3 'x", {}),  # no closing quote: a ValueError from shlex before
        (["x"], {"url": "http://[::1"}),  # an unclosed IPv6 bracket
        (["x"], {"timeout": "0"}),  # was "0.0 or inf": no timeout at all
        (["x"], {"timeout": "0s"}),
        (["x"], {"timeout": math.nan}),  # was accepted (nan <= 0 is False)
        (["x"], {"stall": "0"}),
        (["x"], {"stall": -1}),
        (["x"], {"timeout": [5]}),
    ],
)
def test_the_api_checks_its_arguments_as_the_command_line_does(
    tmp_path: Path, cmd: str | list[str], options: dict[str, object]
) -> None:
    with pytest.raises(UsageError):
        bootwatch.launch(cmd, log=tmp_path / "x.log", **options)  # type: ignore[arg-type]
    if "url" not in options and options:  # watch() takes the same timeout= and stall= through the same check
        with pytest.raises(UsageError):
            bootwatch.watch(tmp_path / "x.log", **options)  # type: ignore[arg-type]
    assert not (tmp_path / "x.log").exists()


async def test_async_launch_on_the_running_loop(tmp_path: Path) -> None:
    async with bootwatch.launch(fake(READY_VLLM, "--then", "serve"), log_dir=tmp_path) as server:
        assert server.report.verdict == "ready"
        pid = server.pid
    assert gone(pid)


async def test_async_cancellation_stops_the_server(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"

    async def start() -> None:
        async with bootwatch.launch(
            fake(READY_SGLANG, "--lines", "3", "--then", "hang", "--pidfile", str(pidfile)), log_dir=tmp_path, stall=600
        ):
            pytest.fail("never ready")

    task = asyncio.create_task(start())
    while not pidfile.exists() or not pidfile.read_text().strip():
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert all(gone(int(p)) for p in pidfile.read_text().split())


def test_sync_launch_ctrl_c_while_waiting_stops_the_server(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    main = threading.get_ident()

    def interrupt() -> None:
        while not pidfile.exists() or not pidfile.read_text().strip():
            time.sleep(0.05)
        signal.pthread_kill(main, signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with (
        pytest.raises(KeyboardInterrupt),
        bootwatch.launch(
            fake(READY_SGLANG, "--lines", "3", "--then", "hang", "--pidfile", str(pidfile)), log_dir=tmp_path
        ),
    ):
        pass
    assert all(gone(int(p)) for p in pidfile.read_text().split())


def test_a_killed_python_leaves_no_server(tmp_path: Path) -> None:
    # The guard process stops the server's group when the program that launched it is SIGKILLed.
    pidfile = tmp_path / "pids"
    cmd = fake(READY_VLLM, "--then", "serve", "--pidfile", str(pidfile))
    script = (
        f"import bootwatch, time\nwith bootwatch.launch({cmd!r}, log_dir={str(tmp_path)!r}):\n"
        "    print('ready', flush=True); time.sleep(600)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    p.kill()
    p.wait()
    assert all(gone(int(x)) for x in pidfile.read_text().split())


def test_watch_a_file_written_by_someone_else(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.touch()
    writer = subprocess.Popen(fake(READY_VLLM, "--out", str(log)))
    try:
        report = bootwatch.watch(log, timeout=60)
    finally:
        writer.wait(timeout=60)
    assert report.verdict == "ready" and report.engine == "vllm"


def test_watch_raises_the_typed_failure(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.touch()
    writer = subprocess.Popen(fake(FAILED_SGLANG, "--out", str(log)))
    try:
        with pytest.raises(ServerFailed) as info:
            bootwatch.watch(str(log), timeout=60)
    finally:
        writer.wait(timeout=60)
    assert info.value.category == "oom" and info.value.log_path == log


def test_analyze_a_log() -> None:
    report = bootwatch.analyze(FAILED_SGLANG)
    assert report.verdict == "failed" and report.category == "oom" and report.phase == "load_weights"
    with pytest.raises(UsageError):
        bootwatch.analyze("/nonexistent.log")


def test_event_hook_gets_typed_events(tmp_path: Path) -> None:
    kinds: list[Event] = []
    with bootwatch.launch(fake(READY_VLLM, "--then", "serve"), log_dir=tmp_path, on_event=kinds.append) as server:
        pass
    assert all(isinstance(ev, Event) for ev in kinds) and server.events
    ready = [ev for ev in kinds if isinstance(ev, ReadyEvent)]
    assert ready and ready[0].kind == "ready" and ready[0].text
    assert {"event": "ready", "line_no": ready[0].line_no, "text": ready[0].text}.items() <= ready[0].to_json(
        1.0
    ).items()
    assert any(isinstance(ev, PhaseEvent) and ev.name == "load_weights" for ev in kinds)


@pytest.mark.real_server
def test_real_llama_server_ready_and_truncated_model_explained(tmp_path: Path) -> None:
    from .test_real_servers import PATHS, free_port, llama_cmd

    assert PATHS
    with bootwatch.launch(llama_cmd(free_port()), log_dir=tmp_path, verify=True, timeout=120) as server:
        assert server.url is not None and server.summary["verify"]["ok"] is True
        assert server.report.engine == "llamacpp"
    with (
        pytest.raises(ServerFailed) as info,
        bootwatch.launch(
            llama_cmd(free_port(), gguf=PATHS["BOOTWATCH_TINY_GGUF_TRUNCATED"]), log_dir=tmp_path, timeout=120
        ),
    ):
        pass
    assert "data is not within the file bounds" in (info.value.root_cause or "")
    assert info.value.phase == "load_weights"
    assert os.path.exists(info.value.log_path or "")
