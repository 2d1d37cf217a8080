"""`watch` that arrives after the launch is ready says READY, since when by the log's clock (red-team-3 N2,
issue 20 item 1): it used to wait for "a new launch" and then call a healthy server STALLED or TIMED OUT, and
with --state drive the probe (a Kubernetes liveness check) to exit 4."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

BOOTWATCH = [sys.executable, "-m", "bootwatch"]
READY_LOG = (
    b"INFO 11-18 17:10:46 api_server.py:585] vLLM API server version 0.6.4.post1\n"
    b"INFO 11-18 17:10:47 model_runner.py:1072] Starting to load model /models/x...\n"
    b"INFO:     Application startup complete.\n"
)


def test_watch_after_ready_says_ready_and_the_probe_agrees(tmp_path: Path) -> None:
    log, state = tmp_path / "fast.log", tmp_path / "st.json"
    log.write_bytes(READY_LOG)
    started = time.monotonic()
    p = subprocess.run(
        [*BOOTWATCH, "watch", "--stall", "6s", "--state", str(state), str(log)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert time.monotonic() - started < 5.0  # not after the stall limit
    assert "already ready since 2026-11-18 17:10:47" in p.stdout  # the last stamp at or before the ready line
    assert "READY" in p.stdout
    probe = subprocess.run([*BOOTWATCH, "probe", "--state", str(state)], capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stdout + probe.stderr


def test_watch_follow_after_ready_says_ready_at_once_and_keeps_following(tmp_path: Path) -> None:
    log = tmp_path / "fast.log"
    log.write_bytes(READY_LOG)
    proc = subprocess.Popen(
        [*BOOTWATCH, "watch", "--follow", "--json", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 10.0
        seen = ""
        while '"ready"' not in seen and time.monotonic() < deadline:
            seen += proc.stdout.readline()
        assert '"ready"' in seen, seen
        time.sleep(0.5)
        assert proc.poll() is None, "watch --follow left instead of following the ready server"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
