"""docker:// and k8s:// sources. No container engine or cluster runs here, so these go through stand-in
`docker` and `kubectl` executables on PATH (tests/helpers/fake_container_cli.py) that replay real logs and
simulate a log-stream end, a restart and an OOM kill. Everything bootwatch does with them is real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import CORPUS, ROOT

READY = CORPUS / "vllm/v0.11-elloraa-gloo-ready.log"
LOADING = CORPUS / "sglang/docs-2025-05-no-tp0-prefix-ready.log"


@pytest.fixture
def fake_cli(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    state = tmp_path / "state"
    state.mkdir()
    script = ROOT / "tests" / "helpers" / "fake_container_cli.py"
    for tool in ("docker", "kubectl"):
        exe = bin_dir / tool
        exe.write_text(
            f"#!{sys.executable}\nimport os, runpy\nos.environ['FAKE_CLI_TOOL'] = {tool!r}\n"
            f"runpy.run_path({str(script)!r}, run_name='__main__')\n"
        )
        exe.chmod(0o755)

    def configure(log: Path, scenario: str, split: int = 10**9) -> dict[str, str]:
        (state / "config.json").write_text(json.dumps({"log": str(log), "scenario": scenario, "split": split}))
        return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_CLI_DIR": str(state)}

    configure.calls = lambda: (state / "calls.log").read_text().splitlines()  # type: ignore[attr-defined]
    return configure


def bw(env: dict[str, str], *args: str) -> tuple[int, dict, list[dict]]:
    p = subprocess.run(
        [sys.executable, "-m", "bootwatch", *args, "--json", "--timeout", "60"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert "Traceback" not in p.stderr, p.stderr
    events = [json.loads(x) for x in p.stdout.splitlines()]
    return p.returncode, events[-1], events


def test_docker_stream_end_reattaches_without_loss_or_repeat(fake_cli) -> None:
    env = fake_cli(READY, "rotate", split=40)
    code, s, _ = bw(env, "watch", "docker://vllm-server")
    assert code == 0 and s["verdict"] == "ready"
    n_lines = READY.read_bytes().count(b"\n")
    ready_line = next(i for i, x in enumerate(READY.read_bytes().split(b"\n"), 1) if b"startup complete" in x)
    assert s["ready"]["line_no"] == ready_line  # the line numbers would shift if a line were lost or repeated
    logs_calls = [c for c in fake_cli.calls() if c.split()[1] == "logs"]
    assert len(logs_calls) == 2 and "--since" in logs_calls[1]
    assert s["lines"] <= n_lines


def test_docker_oom_kill_is_a_failure(fake_cli) -> None:
    env = fake_cli(LOADING, "oom", split=12)
    code, s, _ = bw(env, "watch", "docker://sglang")
    assert code == 1 and s["verdict"] == "failed"
    assert "OOMKilled" in s["failure"]["text"] and s["failure"]["category"] == "killed"


def test_k8s_pod_restart_is_a_failure(fake_cli) -> None:
    env = fake_cli(LOADING, "restart", split=12)
    code, s, _ = bw(env, "watch", "k8s://inference/sglang-0/server")
    assert code == 1 and s["verdict"] == "failed"
    assert "OOMKilled" in s["failure"]["text"] and "restarts 1" in s["failure"]["text"]
    calls = fake_cli.calls()
    assert any(c.startswith("kubectl logs -f --timestamps -n inference") and "-c server" in c for c in calls)


def test_k8s_ready(fake_cli) -> None:
    env = fake_cli(READY, "follow")
    code, s, _ = bw(env, "watch", "k8s://vllm-0")
    assert code == 0 and s["ready"]["text"] == "Application startup complete."


def test_missing_client_is_a_usage_error(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}
    p = subprocess.run(
        [sys.executable, "-m", "bootwatch", "watch", "docker://x"], capture_output=True, text=True, env=env, timeout=60
    )
    assert p.returncode == 2 and "docker" in p.stderr and "Traceback" not in p.stderr
