"""Appended and interleaved logs: a NUL run splits launches (a log truncated under its writer, or another writer's
appends), a bind error once a server is up is another instance's failure, and an Ollama log's summary gives both
the API's readiness and the last model load's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bootwatch.pipeline import analyze_path

SERVER_CONFIG = (
    'time=2025-03-05T06:58:50.117Z level=INFO source=routes.go:1631 msg="server config" env="map[OLLAMA_HOST:]"\n'
)
LISTENING = 'time=2025-03-05T06:58:54.117Z level=INFO source=routes.go:1694 msg="Listening on 127.0.0.1:11434 (version 0.5.13)"\n'
BIND_FAIL = "Error: listen tcp 127.0.0.1:11434: bind: address already in use\n"
LOAD = [
    'time=2025-03-05T07:00:01.000Z level=INFO source=server.go:1350 msg="waiting for llama runner to start responding"\n',
    'time=2025-03-05T07:00:03.000Z level=INFO source=server.go:1388 msg="llama runner started in 2.10 seconds"\n',
]


def report(tmp_path: Path, data: bytes) -> dict:
    log = tmp_path / "ollama.log"
    log.write_bytes(data)
    return analyze_path(log)


def test_a_second_instance_that_cannot_bind_is_that_instances_failure(tmp_path: Path) -> None:
    # The first `ollama serve` is up; a second one, appending to the same log, cannot bind the port.
    s = report(tmp_path, (SERVER_CONFIG + LISTENING + BIND_FAIL).encode())
    assert s["verdict"] == "failed", s
    assert s["failure"]["text"] == BIND_FAIL.strip() and s["failure"]["category"] == "port_in_use"
    assert s["launches"] == 2 and s["launch_start_line"] == 3


def test_a_nul_run_splits_two_writers_of_one_log(tmp_path: Path) -> None:
    # The file was truncated while the second writer held its offset: NULs, then its lines.
    first = (SERVER_CONFIG + LISTENING).encode()
    second = (
        b"\x00" * 4096 + b"Couldn't find '/root/.ollama/id_ed25519'. Generating new private key.\n" + BIND_FAIL.encode()
    )
    s = report(tmp_path, first + second)
    assert s["verdict"] == "failed", s
    assert s["failure"]["text"] == BIND_FAIL.strip()
    assert s["launch_start_line"] == 3  # the line the NULs run into


def test_a_nul_run_after_a_failed_start_begins_a_fresh_launch(tmp_path: Path) -> None:
    first = (SERVER_CONFIG + BIND_FAIL).encode()
    s = report(tmp_path, first + b"\x00" * 512 + (SERVER_CONFIG + LISTENING).encode())
    assert s["verdict"] == "ready" and "Listening on" in s["ready"]["text"], s


def test_ollama_summary_says_the_apis_readiness_and_the_model_loads(tmp_path: Path) -> None:
    s = report(tmp_path, (SERVER_CONFIG + LISTENING + "".join(LOAD)).encode())
    assert s["verdict"] == "ready" and "llama runner started in 2.10 seconds" in s["ready"]["text"], s
    assert s["server_ready"]["line_no"] == 2 and "Listening on" in s["server_ready"]["text"]
    out = subprocess.run(
        [sys.executable, "-m", "bootwatch", "report", str(tmp_path / "ollama.log")],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "API ready at line 2" in out and "model loaded at line 4" in out, out
