"""--metrics-port: the startup as Prometheus metrics, scraped while it happens (a real vLLM CPU startup, and
the stand-in server for the quick cases)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from .conftest import CORPUS, HELPER

BOOTWATCH = [sys.executable, "-m", "bootwatch"]
READY_VLLM = CORPUS / "vllm/v0.11-elloraa-gloo-ready.log"
FAILED_SGLANG = CORPUS / "sglang/rocm-rdna4-tp2-oom-during-weight-load-one-rank.log"
ENUM = re.compile(r'^bootwatch_startup_(phase|state)\{bootwatch_startup_\1="([a-z_]+)"\} 1\.0$', re.M)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[str, str] | None:
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
    except httpx.HTTPError:
        return None
    return {m.group(1): m.group(2) for m in ENUM.finditer(text)} | {"_text": text}


def scrape_until_exit(proc: subprocess.Popen[str], port: int) -> list[dict[str, str]]:
    seen: list[dict[str, str]] = []
    while proc.poll() is None:
        s = scrape(port)
        if s is not None:
            seen.append(s)
        time.sleep(0.1)
    return seen


def test_phase_and_state_change_during_a_replayed_startup(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [
            *BOOTWATCH,
            "run",
            "--log",
            str(tmp_path / "s.log"),
            "--metrics-port",
            str(port),
            "--json",
            "--then",
            "sleep 1",
            "--",
            sys.executable,
            str(HELPER),
            str(READY_VLLM),
            "--scale",
            "0.2",
            "--then",
            "serve",
        ],
        stdout=subprocess.DEVNULL,
        text=True,
    )
    seen = scrape_until_exit(proc, port)
    assert proc.returncode == 0
    phases = [s["phase"] for s in seen if "phase" in s]
    assert len(set(phases)) >= 3 and phases[-1] == "ready", phases
    assert seen[0]["state"] == "starting" and seen[-1]["state"] == "ready"
    last = seen[-1]["_text"]
    assert 'bootwatch_startup_info{engine="vllm"' in last
    assert re.search(r"^bootwatch_startup_time_to_ready_seconds \d", last, re.M)
    assert re.search(r'^bootwatch_server_fact\{name="kv_cache_tokens"\} \d', last, re.M)


def test_a_failed_startup_is_exported(tmp_path: Path) -> None:
    # The same sink through the API's watch: a writer plays a real OOM log into a file being watched.
    from prometheus_client import generate_latest

    import bootwatch
    from bootwatch.sinks.metrics import MetricsSink

    metrics = MetricsSink()
    log = tmp_path / "server.log"
    log.touch()
    writer = subprocess.Popen([sys.executable, str(HELPER), str(FAILED_SGLANG), "--out", str(log)])
    try:
        with pytest.raises(bootwatch.ServerFailed):
            bootwatch.watch(log, timeout=60, sinks=[metrics])
    finally:
        writer.wait(timeout=60)
    text = generate_latest(metrics.registry).decode()
    found = {m.group(1): m.group(2) for m in ENUM.finditer(text)}
    assert found == {"phase": "load_weights", "state": "failed"}, found
    assert 'engine="sglang"' in text


def test_a_port_in_use_is_a_usage_error_and_nothing_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        marker = tmp_path / "started"
        p = subprocess.run(
            [
                *BOOTWATCH,
                "run",
                "--log",
                str(tmp_path / "s.log"),
                "--metrics-port",
                str(port),
                "--",
                "sh",
                "-c",
                f"touch {marker}",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert p.returncode == 2 and "--metrics-port" in p.stderr and "in use" in p.stderr
    assert "Traceback" not in p.stderr and not marker.exists()


@pytest.mark.real_server
@pytest.mark.slow
def test_scrape_during_a_real_vllm_startup(tmp_path: Path) -> None:
    from .test_real_servers import free_port as port_for_server
    from .test_real_servers import vllm_cmd

    port = free_port()
    proc = subprocess.Popen(
        [
            *BOOTWATCH,
            "run",
            "--log",
            str(tmp_path / "vllm.log"),
            "--timeout",
            "240",
            "--metrics-port",
            str(port),
            "--json",
            "--then",
            "sleep 1",
            "--",
            *vllm_cmd(port_for_server()),
        ],
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        seen = scrape_until_exit(proc, port)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=60)
    assert proc.returncode == 0
    phases = list(dict.fromkeys(s["phase"] for s in seen if "phase" in s))
    # vLLM's own /metrics is down all this while (its port opens at ready); ours shows each phase go by.
    assert "load_weights" in phases and phases[-1] == "ready" and len(phases) >= 3, phases
    assert seen[0]["state"] == "starting" and seen[-1]["state"] == "ready"
    (tmp_path / "phases-seen").write_text(" ".join(phases))
    print("phases scraped:", " -> ".join(phases))
