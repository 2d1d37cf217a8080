"""`bootwatch probe`: ready, starting, stalled and dead, from the state file a real `run --state` keeps and
from the log itself; elapsed time alone never fails it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from .conftest import CORPUS, HELPER

BOOTWATCH = [sys.executable, "-m", "bootwatch"]
READY_VLLM = CORPUS / "vllm/v0.11-elloraa-gloo-ready.log"
FAILED_SGLANG = CORPUS / "sglang/rocm-rdna4-tp2-oom-during-weight-load-one-rank.log"
READY_SGLANG = CORPUS / "sglang/docs-2025-05-no-tp0-prefix-ready.log"


def fake(log: Path, *extra: str) -> list[str]:
    return [sys.executable, str(HELPER), str(log), *extra]


def probe(*args: str) -> tuple[int, dict]:
    p = subprocess.run([*BOOTWATCH, "probe", "--json", *args], capture_output=True, text=True, timeout=30)
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, json.loads(p.stdout) if p.stdout.strip() else {"stderr": p.stderr}


def wait_for(cond, timeout: float = 30.0) -> None:  # noqa: ANN001
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_ready_inside_then(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    out = tmp_path / "probe.out"
    p = subprocess.run(
        [
            *BOOTWATCH,
            "run",
            "--log",
            str(tmp_path / "s.log"),
            "--state",
            str(state),
            "--then",
            f"{sys.executable} -m bootwatch probe --state {state} --ready > {out}",
            "--",
            *fake(READY_VLLM, "--then", "serve"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stdout[-2000:]
    assert out.read_text().startswith("ready")


def test_starting_then_stalled_then_final(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    run = subprocess.Popen(
        [
            *BOOTWATCH,
            "run",
            "--log",
            str(tmp_path / "s.log"),
            "--state",
            str(state),
            "--stall",
            "3",
            "--json",
            "--",
            *fake(READY_SGLANG, "--lines", "3", "--then", "hang"),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: state.exists() and json.loads(state.read_text()).get("server_pid"))
        code, ans = probe("--state", str(state))
        assert code == 0 and ans["status"] == "starting"
        code, ans = probe("--state", str(state), "--ready")
        assert code == 3 and ans["status"] == "starting"
        # The probe judges silence itself (the log's mtime) when asked to, before the watcher's own stall.
        time.sleep(1.2)
        code, ans = probe("--state", str(state), "--stall", "1")
        assert code == 4 and ans["status"] == "stalled"
        assert run.wait(timeout=60) == 4
    finally:
        if run.poll() is None:
            run.kill()
    code, ans = probe("--state", str(state))
    assert code == 4 and ans["status"] == "stalled"


def test_dead_with_its_root_cause(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    p = subprocess.run(
        [
            *BOOTWATCH,
            "run",
            "--log",
            str(tmp_path / "s.log"),
            "--state",
            str(state),
            "--",
            *fake(FAILED_SGLANG, "--then", "exit:1"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 1
    code, ans = probe("--state", str(state))
    assert code == 1 and ans["status"] == "dead" and "out of memory" in ans["detail"].lower()


def _state(path: Path, **fields: object) -> None:
    now = time.time()
    data = {
        "version": 1,
        "pid": 1,
        "started": now - 5000,
        "source": "docker://x",
        "state": "starting",
        "phase": "load_weights",
        "progress": 0.3,
        "last_event": now,
        "heartbeat": now,
        "server_pid": None,
    }
    data.update(fields)
    path.write_text(json.dumps(data))


def test_elapsed_time_alone_never_fails(tmp_path: Path) -> None:
    # Started 5000 s ago, still in load_weights, still talking: starting, exit 0.
    state = tmp_path / "s.json"
    _state(state)
    code, ans = probe("--state", str(state), "--stall", "10m")
    assert code == 0 and ans["status"] == "starting" and ans["phase"] == "load_weights"


def test_a_gone_server_pid_is_dead_and_a_stale_watcher_is_not(tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    gone = subprocess.Popen(["true"])
    gone.wait()
    _state(state, server_pid=gone.pid)
    code, ans = probe("--state", str(state))
    assert code == 1 and "is gone" in ans["detail"]
    # A watcher that stopped writing (a sidecar restarting) is no reason to kill a loading server.
    _state(state, heartbeat=time.time() - 600, server_pid=os.getpid())
    code, ans = probe("--state", str(state))
    assert code == 0 and ans["status"] == "unknown" and "stopped writing" in ans["detail"]


def test_missing_and_broken_state_files(tmp_path: Path) -> None:
    code, ans = probe("--state", str(tmp_path / "not-yet.json"))
    assert code == 0 and ans["status"] == "unknown"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    p = subprocess.run([*BOOTWATCH, "probe", "--state", str(bad)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and p.stderr.startswith("bootwatch: ") and "Traceback" not in p.stderr
    p = subprocess.run([*BOOTWATCH, "probe"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "--state" in p.stderr


def test_from_the_log_itself(tmp_path: Path) -> None:
    assert probe(str(READY_VLLM))[0] == 0
    code, ans = probe(str(FAILED_SGLANG))
    assert code == 1 and ans["status"] == "dead"
    partial = tmp_path / "partial.log"
    partial.write_bytes(b"".join(READY_SGLANG.read_bytes().splitlines(keepends=True)[:3]))
    code, ans = probe(str(partial), "--stall", "1h")
    assert code == 0 and ans["status"] == "starting"
    old = time.time() - 7200
    os.utime(partial, (old, old))
    code, ans = probe(str(partial), "--stall", "10m")
    assert code == 4 and ans["status"] == "stalled"
    # A stale state file falls back to the log.
    state = tmp_path / "s.json"
    _state(state, heartbeat=time.time() - 600)
    assert probe("--state", str(state), str(FAILED_SGLANG))[0] == 1


def test_history_suggest_probes_from_real_runs(tmp_path: Path) -> None:
    env = {**os.environ, "BOOTWATCH_HOME": str(tmp_path / "home")}
    for i in range(3):
        p = subprocess.run(
            [
                *BOOTWATCH,
                "run",
                "--log",
                str(tmp_path / f"s{i}.log"),
                "--json",
                "--then",
                "true",
                "--",
                *fake(READY_VLLM, "--then", "serve"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert p.returncode == 0
    p = subprocess.run([*BOOTWATCH, "history", "--suggest-probes"], capture_output=True, text=True, timeout=30, env=env)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert '- engine: "vllm"' in out and "3 ready startup(s)" in out and "startupProbe:" in out
    period = int(out.split("periodSeconds: ")[1].split()[0])
    threshold = int(out.split("failureThreshold: ")[1].split()[0])
    p95 = float(out.split("p95 ")[1].split()[0])
    assert period * threshold > 1.5 * p95 and threshold >= 3


def test_suggestion_arithmetic() -> None:
    from bootwatch.probe_suggest import percentile, suggest
    from bootwatch.store import StoredStartup
    from bootwatch.store.model import Command

    times = [100.0 + i for i in range(19)] + [900.0]
    rows = [
        StoredStartup(0, 1, "h", "s", Command("run"), "sglang", "ready", model="m", time_to_ready_s=t) for t in times
    ]
    rows.append(StoredStartup(0, 1, "h", "s", Command("run"), "sglang", "failed", model="m", elapsed_s=5.0))
    (s,) = suggest(rows)
    assert s.count == 20 and s.p95_s == percentile(times, 0.95) == 118.0 and s.max_s == 900.0
    assert s.period_s == 5 and s.budget_s > 1.5 * 118.0
