"""watch / run / replay against real processes: a writer that plays a real corpus log with its pacing
scaled down, servers that exit, die, hang, lose a child or open their port early."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import CORPUS, HELPER, corpus_params, wait_until_open
from .helpers.inprocess import run_cli

BOOTWATCH = [sys.executable, "-m", "bootwatch"]
READY_VLLM = CORPUS / "vllm/v0.11-elloraa-gloo-ready.log"
FAILED_SGLANG = CORPUS / "sglang/rocm-rdna4-tp2-oom-during-weight-load-one-rank.log"
READY_SGLANG = CORPUS / "sglang/docs-2025-05-no-tp0-prefix-ready.log"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fake(log: Path, *extra: str) -> list[str]:
    return [sys.executable, str(HELPER), str(log), *extra]


def bw(*args: str, timeout: float = 60) -> tuple[int, list[dict]]:
    p = subprocess.run([*BOOTWATCH, *args], capture_output=True, text=True, timeout=timeout)
    events = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, events


def summary(events: list[dict]) -> dict:
    assert events and events[-1]["event"] == "summary", events[-3:]
    return events[-1]


def watch_while_written(src: Path, tmp_path: Path, *extra: str) -> tuple[int, list[dict]]:
    """`bootwatch watch` started first, on a file that does not exist yet; then a writer plays `src` into it."""
    log = tmp_path / "server.log"
    watcher = subprocess.Popen(
        [*BOOTWATCH, "watch", str(log), "--json", "--timeout", "30", *extra], stdout=subprocess.PIPE, text=True
    )
    assert watcher.stdout is not None
    first = watcher.stdout.readline()  # it says it waits for the file: the launch is written only then
    assert "to appear" in first, first
    subprocess.run(fake(src, "--out", str(log)), check=True, timeout=60)
    out, _ = watcher.communicate(timeout=60)
    return watcher.returncode, [json.loads(x) for x in (first + out).splitlines() if x.startswith("{")]


def test_watch_follows_a_file_that_does_not_exist_yet(tmp_path: Path) -> None:
    code, events = watch_while_written(READY_VLLM, tmp_path)
    s = summary(events)
    assert code == 0 and s["verdict"] == "ready"
    kinds = [e["event"] for e in events]
    assert "phase" in kinds and "ready" in kinds and kinds.index("phase") < kinds.index("ready")
    assert s["ready"]["text"] == "Application startup complete."


def test_watch_reports_the_root_cause_of_a_failure(tmp_path: Path) -> None:
    code, events = watch_while_written(FAILED_SGLANG, tmp_path)
    s = summary(events)
    assert code == 1 and s["verdict"] == "failed"
    assert s["failure"]["text"].startswith("torch.OutOfMemoryError: CUDA out of memory")
    assert any(e["event"] == "failed" for e in events)


def test_watch_ignores_a_stale_ready_and_judges_the_new_launch(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(READY_SGLANG.read_bytes())  # an earlier launch that was ready
    proc = subprocess.Popen(
        [*BOOTWATCH, "watch", str(log), "--json", "--timeout", "30"], stdout=subprocess.PIPE, text=True
    )
    wait_until_open(proc.pid, log)
    time.sleep(0.5)
    assert proc.poll() is None, "a ready line from an earlier launch is not readiness now"
    subprocess.run(fake(FAILED_SGLANG, "--out", str(log)), check=True, timeout=30)
    out, _ = proc.communicate(timeout=30)
    events = [json.loads(x) for x in out.splitlines()]
    assert proc.returncode == 1 and summary(events)["verdict"] == "failed"


def test_watch_times_out_with_124(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    subprocess.run(fake(READY_SGLANG, "--out", str(log), "--lines", "8"), check=True, timeout=30)
    code, events = bw("watch", str(log), "--json", "--timeout", "1.5", "--stall", "1h")
    assert code == 124 and summary(events)["verdict"] == "timeout"
    assert any(e["event"] == "timeout" for e in events)


def test_watch_stall_in_distributed_init_exits_4(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    # The real log up to "Init torch distributed begin." and then silence.
    lines = READY_SGLANG.read_bytes().split(b"\n")
    cut = next(i for i, x in enumerate(lines) if b"Init torch distributed begin" in x) + 1
    log.write_bytes(b"\n".join(lines[:cut]) + b"\n")
    code, events = bw("watch", str(log), "--from-start", "--json", "--stall", "1", "--timeout", "60")
    assert code == 4
    stall = [e for e in events if e["event"] == "stall"]
    assert stall and stall[0]["phase"] == "distributed_init"
    assert "Init torch distributed begin." in stall[0]["message"]
    assert summary(events)["verdict"] == "stalled"


def test_watch_url_refused_then_503_then_200(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    port = free_port()
    writer = subprocess.Popen(
        fake(READY_VLLM, "--out", str(log), "--port", str(port), "--early-port", "--then", "serve", "--scale", "0.02"),
        start_new_session=True,
    )
    try:
        code, events = bw(
            "watch", str(log), "--json", "--url", f"http://127.0.0.1:{port}/health", "--verify", "--timeout", "30"
        )
    finally:
        writer.terminate()
        writer.wait(timeout=10)
    health = [e["value"] for e in events if e["event"] == "fact" and e["name"] == "health"]
    assert code == 0, events[-1]
    assert "503 (starting)" in health and health[-1] == "200"
    assert health.index("503 (starting)") < health.index("200")
    verify = [e for e in events if e["event"] == "fact" and e["name"] == "verify_latency_s"]
    assert verify and verify[0]["ok"] is True


def test_run_then_runs_the_command_and_stops_the_server(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    marker = tmp_path / "then-ran"
    code, events = bw(
        "run", "--log", str(log), "--json", "--then", f"touch {marker}", "--", *fake(READY_VLLM, "--then", "serve")
    )
    assert code == 0 and marker.exists()
    assert summary(events)["verdict"] == "ready"
    # Every byte the server printed, as printed, up to the moment --then was done and it was stopped.
    written = log.read_bytes()
    assert READY_VLLM.read_bytes().startswith(written) and b"Application startup complete." in written


def test_run_then_exit_code_is_the_commands(tmp_path: Path) -> None:
    code, _ = bw(
        "run",
        "--log",
        str(tmp_path / "r.log"),
        "--json",
        "--then",
        "exit 7",
        "--",
        *fake(READY_VLLM, "--then", "serve"),
    )
    assert code == 7


def test_run_server_exits_nonzero_with_traceback(tmp_path: Path) -> None:
    code, events = bw("run", "--log", str(tmp_path / "r.log"), "--json", "--", *fake(FAILED_SGLANG, "--then", "exit:1"))
    s = summary(events)
    assert code == 1 and s["verdict"] == "failed" and s["failure"]["category"] == "oom"


def test_run_sigkill_without_traceback_says_killed(tmp_path: Path) -> None:
    code, events = bw(
        "run", "--log", str(tmp_path / "r.log"), "--json", "--", *fake(READY_SGLANG, "--lines", "12", "--then", "kill")
    )
    s = summary(events)
    assert code == 1 and s["failure"]["category"] == "killed"
    assert "SIGKILL" in s["failure"]["text"] and "OOM" in s["failure"]["text"]


def test_run_child_dies_while_parent_lives(tmp_path: Path) -> None:
    start = time.time()
    code, events = bw(
        "run",
        "--log",
        str(tmp_path / "r.log"),
        "--json",
        "--timeout",
        "60",
        "--",
        *fake(
            READY_SGLANG, "--lines", "12", "--child", "VLLM::EngineCore", "--kill-child-after-ready", "--then", "hang"
        ),
    )
    s = summary(events)
    assert code == 1 and "VLLM::EngineCore" in s["failure"]["text"]
    assert time.time() - start < 20  # now, not at the timeout


def test_run_child_renamed_by_exec_is_not_a_death(tmp_path: Path) -> None:
    # A process forked from a critical child carries its title until it execs (vLLM's EngineCore spawning a
    # worker): the title going away from a live process is no death (it stopped a real vLLM in the suite).
    code, events = bw(
        "run",
        "--log",
        str(tmp_path / "r.log"),
        "--json",
        "--timeout",
        "60",
        "--then",
        "true",
        "--",
        *fake(
            READY_SGLANG,
            "--child",
            "VLLM::EngineCore",
            "--child-renames-after",
            "0.8",
            "--scale",
            "1",
            "--max-gap",
            "0.4",
            "--then",
            "hang",
        ),
    )
    s = summary(events)
    assert code == 0 and s["verdict"] == "ready", s.get("failure")


def test_run_hang_stalls_and_the_server_is_stopped(tmp_path: Path) -> None:
    code, events = bw(
        "run",
        "--log",
        str(tmp_path / "r.log"),
        "--json",
        "--stall",
        "1",
        "--",
        *fake(READY_SGLANG, "--lines", "3", "--then", "hang"),
    )
    assert code == 4 and summary(events)["verdict"] == "stalled"


def test_run_port_open_early_is_not_ready(tmp_path: Path) -> None:
    port = free_port()
    code, events = bw(
        "run",
        "--log",
        str(tmp_path / "r.log"),
        "--json",
        "--url",
        f"http://127.0.0.1:{port}/health",
        "--then",
        "true",
        "--",
        *fake(READY_VLLM, "--port", str(port), "--early-port", "--then", "serve", "--scale", "0.02"),
    )
    assert code == 0
    kinds = [(e["event"], e.get("value")) for e in events]
    assert ("fact", "503 (starting)") in kinds
    ready_at = [i for i, e in enumerate(events) if e["event"] == "ready"]
    first_503 = kinds.index(("fact", "503 (starting)"))
    assert ready_at and first_503 < ready_at[0]


def test_run_port_held_by_another_process_is_not_ready(tmp_path: Path) -> None:
    port = free_port()
    other = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        code, events = bw(
            "run",
            "--log",
            str(tmp_path / "r.log"),
            "--json",
            "--url",
            f"http://127.0.0.1:{port}/health",
            "--timeout",
            "3",
            "--stall",
            "1h",
            "--",
            *fake(READY_SGLANG, "--lines", "12", "--then", "hang"),
        )
    finally:
        other.terminate()
        other.wait()
    assert code == 124
    health = [e["value"] for e in events if e["event"] == "fact" and e["name"] == "health"]
    assert health and all("not this server" in h for h in health)


def test_run_detach_leaves_the_server_running(tmp_path: Path) -> None:
    log = tmp_path / "r.log"
    p = subprocess.run(
        [*BOOTWATCH, "run", "--log", str(log), "--detach", "--", *fake(READY_VLLM, "--then", "serve")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0
    pid = int(p.stdout.split("server pid ")[1].split()[0])
    try:
        os.kill(pid, 0)  # still alive
    finally:
        os.killpg(pid, signal.SIGTERM)


def test_run_ctrl_c_stops_the_server_and_exits_130(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            *BOOTWATCH,
            "run",
            "--log",
            str(tmp_path / "r.log"),
            "--json",
            "--",
            *fake(READY_SGLANG, "--lines", "5", "--then", "hang"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode == 130


def test_run_plain_follows_after_ready_until_the_server_exits(tmp_path: Path) -> None:
    code, events = bw("run", "--log", str(tmp_path / "r.log"), "--json", "--", *fake(READY_VLLM, "--then", "exit:0"))
    assert code == 0 and summary(events)["verdict"] == "ready"
    code, events = bw("run", "--log", str(tmp_path / "r2.log"), "--json", "--", *fake(READY_VLLM, "--then", "exit:3"))
    s = summary(events)
    assert code == 1 and s["verdict"] == "ready" and s["runtime_failure"] is not None


WRITER = r"""
import hashlib, os, sys
h = hashlib.sha256(); n = 0; i = 0
while n < 200 * 1024 * 1024:
    chunk = (b"line %d \xff\xfe invalid utf-8 \r progress %d" % (i, i)) * 50
    if i % 3 == 0:
        chunk += b"\n"
    os.write(1, chunk); h.update(chunk); n += len(chunk); i += 1
open(sys.argv[1], "w").write(h.hexdigest())
"""


def test_run_keeps_every_byte_of_a_fast_writer(tmp_path: Path) -> None:
    log, digest = tmp_path / "big.log", tmp_path / "sha"
    code, events = bw("run", "--log", str(log), "--json", "--", sys.executable, "-c", WRITER, str(digest), timeout=300)
    import hashlib

    got = hashlib.sha256(log.read_bytes()).hexdigest()
    assert got == digest.read_text()
    assert code == 1  # it exited 0 without ever being ready: not a successful startup


# Logs whose live replay names another cause than the report, each with its class (strict: a fix fails the suite
# until the entry leaves).
REPLAY_DISAGREES = {
    "sglang/2025-gke-cloud-logging-newest-first-llama31-70b-tp8-fa3-dev-shm-nccl-segment-failed": (
        "a newest-first export: report reads the file from its last line up, a replay as the lines come (found by "
        "blind batch G12)"
    ),
    "ollama/0.3.14-hpc-slurm-debug-port-39001-cuda-visible-0-three-loads-last-24s-ready": (
        "three model loads of an old Ollama with DEBUG lines: report starts the last launch at the third load, "
        "the replay keeps the first load's launch (the once-per-launch model-load rule decided apart; found by G12)"
    ),
}


@pytest.mark.parametrize("label", corpus_params(REPLAY_DISAGREES))
def test_replay_agrees_with_report(label: Path) -> None:
    # Both commands in process (tests/helpers/inprocess.py): the point is what they say, and two interpreter
    # starts per corpus log were most of the quick suite. `replay --speed 0` as a subprocess: test_outcome_stream.
    log = label.with_suffix(".log")
    rep = json.loads(run_cli("report", "--json", str(log)).stdout)
    replayed = run_cli("replay", "--speed", "0", "--json", str(log))
    assert "Traceback" not in replayed.stderr, replayed.stderr
    code, events = replayed.returncode, replayed.events()
    s = summary(events)
    assert s["verdict"] == rep["verdict"]
    assert code == {"ready": 0, "failed": 1, "incomplete": 3}[rep["verdict"]]
    if rep["failure"]:
        assert s["failure"]["text"] == rep["failure"]["text"]
    if rep["ready"]:
        assert s["ready"]["line_no"] == rep["ready"]["line_no"]


def test_history_records_watched_startups(tmp_path: Path) -> None:
    env_home = tmp_path / "home"
    env = {**os.environ, "BOOTWATCH_HOME": str(env_home)}
    subprocess.run(
        [
            *BOOTWATCH,
            "run",
            "--log",
            str(tmp_path / "r.log"),
            "--then",
            "true",
            "--",
            *fake(READY_SGLANG, "--then", "serve"),
        ],
        env=env,
        capture_output=True,
        timeout=60,
        check=True,
    )
    subprocess.run(
        [*BOOTWATCH, "run", "--log", str(tmp_path / "f.log"), "--", *fake(FAILED_SGLANG, "--then", "exit:1")],
        env=env,
        capture_output=True,
        timeout=60,
    )
    p = subprocess.run([*BOOTWATCH, "history", "--json"], env=env, capture_output=True, text=True, timeout=30)
    entries = [json.loads(x) for x in p.stdout.splitlines()]
    assert [e["verdict"] for e in entries] == ["ready", "failed"]
    assert entries[0]["engine"] == "sglang" and entries[0]["model"] == "qwen/qwen2.5-0.5b-instruct"
    assert "load_weights" in [ph["name"] for ph in entries[0]["phases"]]
    assert entries[1]["root_cause"].startswith("torch.OutOfMemoryError")
    assert [e["command"] for e in entries] == ["run", "run"] and entries[0]["time_to_ready_s"] is not None
    table = subprocess.run([*BOOTWATCH, "history"], env=env, capture_output=True, text=True, timeout=30).stdout
    assert "qwen/qwen2.5-0.5b-instruct" in table and "failed" in table


# N7: `watch --pid` names the server's process. A traceback it survives (a cache miss it retries, a caught error it
# logs) must not settle as a failure on the quiet spell while that process lives; its end settles the launch, as
# `run`'s exit does. (Without --pid nothing says it still runs: the quiet spell settles it, see README.)
SURVIVED = (
    "INFO 11-18 17:10:46 api_server.py:585] vLLM API server version 0.6.4.post1\n"
    "INFO 11-18 17:10:47 model_runner.py:1072] Starting to load model /models/x...\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3/site-packages/huggingface_hub/file_download.py", line 1374, in _hf_hub_download\n'
    "    raise LocalEntryNotFoundError(\n"
    "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache and outgoing "
    "traffic has been disabled.\n"
)
# The server: prints what it is given, then waits for the test's go (a file) and prints the rest, or exits 1.
PID_SERVER = """import os, sys, time
out, first, go, then = sys.argv[1:5]
with open(out, "a") as f:
    f.write(first); f.flush()
    while not os.path.exists(go):
        time.sleep(0.05)
    if then == "exit":
        sys.exit(1)
    f.write(then); f.flush()
    time.sleep(30)
"""


def wait_following(pid: int, timeout: float = 30.0) -> None:
    """Until `watch` (process `pid`) follows its file: its inotify descriptor, made when the session starts."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd) == "anon_inode:inotify":
                    return
        time.sleep(0.02)
    raise AssertionError(f"watch (pid {pid}) never followed its file within {timeout} s")


def _pid_server(tmp_path: Path, first: str, then: str) -> tuple[subprocess.Popen[bytes], Path, Path]:
    log, go, script = tmp_path / "server.log", tmp_path / "go", tmp_path / "server.py"
    script.write_text(PID_SERVER)
    server = subprocess.Popen([sys.executable, str(script), str(log), first, str(go), then])
    while not log.exists() or log.stat().st_size < len(first):
        time.sleep(0.05)
    return server, log, go


def test_watch_pid_a_traceback_the_live_server_survives_is_not_its_failure(tmp_path: Path) -> None:
    server, log, go = _pid_server(tmp_path, SURVIVED, "INFO:     Application startup complete.\n")
    try:
        watcher = subprocess.Popen(
            [*BOOTWATCH, "watch", "--json", "--from-start", "--pid", str(server.pid), "--timeout", "60", str(log)],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(6.5)  # longer than the 5 s quiet spell that settles a traceback when nothing says it runs
        go.touch()
        out, _ = watcher.communicate(timeout=60)
    finally:
        server.kill()
        server.wait()
    s = summary([json.loads(x) for x in out.splitlines() if x.startswith("{")])
    assert (watcher.returncode, s["verdict"]) == (0, "ready"), s


@pytest.mark.parametrize(
    ("first", "cause"),
    [
        (SURVIVED, "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files"),
        (SURVIVED.split("Traceback")[0], "is gone"),
    ],
    ids=["its-traceback", "no-word-of-why"],
)
def test_watch_pid_the_end_of_the_process_settles_the_launch(tmp_path: Path, first: str, cause: str) -> None:
    server, log, go = _pid_server(tmp_path, first, "exit")
    watcher = subprocess.Popen(
        [*BOOTWATCH, "watch", "--json", "--from-start", "--pid", str(server.pid), "--timeout", "30", str(log)],
        stdout=subprocess.PIPE,
        text=True,
    )
    # The server lives until the watch follows the file, which it does only once it has found the --pid
    # process (a guessed second was too short on a loaded machine: "--pid: no such process").
    wait_following(watcher.pid)
    go.touch()
    server.wait()
    out, _ = watcher.communicate(timeout=60)
    s = summary([json.loads(x) for x in out.splitlines() if x.startswith("{")])
    assert (watcher.returncode, s["verdict"]) == (1, "failed"), s
    assert cause in s["failure"]["text"], s["failure"]
