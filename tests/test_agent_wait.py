"""The bounded wait (`watch --wait-at-most`): exit 3 with where the startup stands, within the bound, and a
repeated call that continues where the previous one stopped. Driven by a real corpus log written slowly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from .conftest import ROOT

BOOTWATCH = [sys.executable, "-m", "bootwatch"]
VLLM_LOG = ROOT / "tests/corpus/vllm/v0.9.2-qwen25-3b-local-path-port8801-ready.log"
FAILED_LOG = ROOT / "tests/corpus/llamacpp/b2026-terse-log-couldnt-bind-port-8080-failed.log"


def bw(home: Path, *args: str) -> tuple[int, dict, float, str]:
    start = time.monotonic()
    env = {**os.environ, "BOOTWATCH_HOME": str(home)}
    p = subprocess.run([*BOOTWATCH, *args], capture_output=True, text=True, timeout=60, env=env)
    took = time.monotonic() - start
    assert "Traceback" not in p.stderr, p.stderr
    last = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    return p.returncode, json.loads(last[-1]) if last else {}, took, p.stdout + p.stderr


def _lines(path: Path) -> list[bytes]:
    """The log's lines as the project counts them: split on \n only (a \r stays inside its line)."""
    return [ln + b"\n" for ln in path.read_bytes().rstrip(b"\n").split(b"\n")]


def test_wait_at_most_returns_3_in_time_and_the_next_call_continues(tmp_path: Path) -> None:
    lines = _lines(VLLM_LOG)
    log = tmp_path / "server.log"
    home = tmp_path / "home"
    log.write_bytes(b"".join(lines[:16]))  # loading the weights: shard 1 of 2

    first_code, first, took, _ = bw(home, "watch", str(log), "--wait-at-most", "2s", "--json")
    assert first_code == 3, first
    assert took < 2.5
    st = first["standing"]
    assert st["state"] == "starting" and st["phase"] == "load_weights" and st["progress"] == 0.5
    assert st["last_line"]["line_no"] == 16 and st["calls"] == 1
    assert first["verdict"] == "incomplete" and first["outcome"] == "starting"

    # The server goes on printing while the next call waits: one line every 50 ms.
    def write_slowly(upto: int) -> None:
        with log.open("ab") as f:
            for ln in lines[16:upto]:
                f.write(ln)
                f.flush()
                time.sleep(0.05)

    writer = threading.Thread(target=write_slowly, args=(40,))
    writer.start()
    second_code, second, took, _ = bw(home, "watch", str(log), "--wait-at-most", "2s", "--json")
    writer.join()
    assert second_code == 3 and took < 2.5
    st = second["standing"]
    assert st["calls"] == 2 and st["moved"] is True
    assert st["new_lines"] == 40 - 16 and st["last_line"]["line_no"] == 40  # from where the first stopped
    assert st["phase"] in ("cuda_graph", "warmup") and st["phase"] != "load_weights"
    state = json.loads(next((home / "waits").glob("*.json")).read_text())
    assert state["file"]["offset"] == log.stat().st_size and state["file"]["launch_line"] == 2

    # Nothing new: the call says so.
    third_code, third, _, _ = bw(home, "watch", str(log), "--wait-at-most", "0.5s", "--json")
    assert third_code == 3 and third["standing"]["moved"] is False and third["standing"]["new_lines"] == 0

    with log.open("ab") as f:
        f.write(b"".join(lines[40:]))
    code, done, took, _ = bw(home, "watch", str(log), "--wait-at-most", "30s", "--json")
    assert code == 0 and done["verdict"] == "ready" and took < 10
    assert done["standing"]["state"] == "ready" and done["standing"]["calls"] == 4
    # The phases keep the times the calls that saw them kept: weights loaded across the first two calls.
    load = next(p for p in done["phases"] if p["name"] == "load_weights")
    assert load["duration_s"] >= 1.5, done["phases"]

    # Ready is said again at once, and the history holds the startup once.
    code, again, _, text = bw(home, "watch", str(log), "--wait-at-most", "30s")
    assert code == 0 and text.startswith("ready after")
    code, _, _, hist = bw(home, "history", "--json")
    assert code == 0 and len([ln for ln in hist.splitlines() if ln.startswith("{")]) == 1


def test_wait_on_a_failed_log_returns_at_once_with_the_root_cause(tmp_path: Path) -> None:
    log = tmp_path / "llama.log"
    log.write_bytes(FAILED_LOG.read_bytes())
    code, s, took, _ = bw(tmp_path / "home", "watch", str(log), "--wait-at-most", "20s", "--json")
    assert code == 1 and took < 10
    assert s["standing"]["state"] == "failed"
    assert "couldn't bind HTTP server socket" in s["standing"]["root_cause"]
    code, _, _, text = bw(tmp_path / "home", "watch", str(log), "--wait-at-most", "20s")
    assert code == 1 and text.startswith("failed in") and "couldn't bind" in text


def test_a_replaced_file_is_read_anew(tmp_path: Path) -> None:
    lines = _lines(VLLM_LOG)
    log, home = tmp_path / "server.log", tmp_path / "home"
    log.write_bytes(b"".join(lines[:30]))
    code, s, _, _ = bw(home, "watch", str(log), "--wait-at-most", "0.5s", "--json")
    assert code == 3 and s["standing"]["phase"] == "cuda_graph"
    new = tmp_path / "new.log"
    new.write_bytes(b"".join(lines[:16]))
    os.replace(new, log)  # another file under the same name (logrotate, a restart with `>`)
    code, s, _, _ = bw(home, "watch", str(log), "--wait-at-most", "0.5s", "--json")
    assert code == 3 and s["standing"]["phase"] == "load_weights" and s["standing"]["last_line"]["line_no"] == 16
    assert any("not the file the previous call read" in n for n in s["standing"]["notes"])


def test_wait_state_path_and_usage_errors(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"".join(_lines(VLLM_LOG)[:16]))
    home = tmp_path / "home"
    state = tmp_path / "wait.json"
    code, _, _, _ = bw(home, "watch", str(log), "--wait-at-most", "0.3s", "--wait-state", str(state))
    assert code == 3 and json.loads(state.read_text())["calls"] == 1
    assert oct(state.stat().st_mode & 0o777) == "0o600"
    for args, says in (
        (["watch", str(log), str(log), "--wait-at-most", "1s"], "one SOURCE"),
        (["watch", str(log), "--wait-at-most", "1s", "--follow"], "--follow"),
        (["watch", str(log), "--wait-at-most", "1s", "--wait-state", "/nonexistent/dir/x.json"], "does not exist"),
        (["run", "--wait-at-most", "1s", "--", "true"], "needs --detach"),
        (["watch", str(log), "--wait-at-most", "soon"], "bad duration"),
    ):
        code, _, _, text = bw(home, *args)
        assert code == 2 and says in text, (args, text)


def test_silence_before_the_call_counts_toward_stall(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"".join(_lines(VLLM_LOG)[:16]))
    old = time.time() - 300
    os.utime(log, (old, old))  # the log last grew five minutes ago
    code, s, _, _ = bw(tmp_path / "home", "watch", str(log), "--wait-at-most", "2s", "--stall", "60s", "--json")
    assert code == 4 and s["standing"]["state"] == "stalled" and s["standing"]["silent_s"] >= 299
    code, s, _, _ = bw(tmp_path / "home2", "watch", str(log), "--wait-at-most", "1s", "--stall", "20m", "--json")
    assert code == 3 and s["standing"]["state"] == "starting"


def test_a_detached_server_that_vanishes_is_a_failure_of_the_next_wait(tmp_path: Path) -> None:
    head = tmp_path / "head.log"
    head.write_bytes(b"".join(_lines(VLLM_LOG)[:16]))
    log, home = tmp_path / "server.log", tmp_path / "home"
    code, s, _, _ = bw(
        home,
        "run",
        "--detach",
        "--wait-at-most",
        "1s",
        "--json",
        "--log",
        str(log),
        "--",
        "bash",
        "-c",
        f"cat {head}; sleep 2",
    )
    assert code == 3 and s["standing"]["server"]["alive"] is True, s
    pid = s["standing"]["server"]["pid"]
    deadline = time.time() + 10
    while time.time() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.1)
    code, s, _, _ = bw(home, "watch", str(log), "--wait-at-most", "5s", "--json")
    assert code == 1 and s["standing"]["state"] == "failed"
    assert f"pid {pid}) is gone" in s["standing"]["root_cause"] and s["standing"]["server"]["alive"] is False
    assert s["standing"]["calls"] == 2 and s["standing"]["phase"] == "load_weights"
