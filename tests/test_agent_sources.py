"""The bounded wait on the sources other than a file: ssh (a real sshd, tests/sshd_fixture.py) and docker /
k8s (stand-in clients replaying real logs, tests/test_containers.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import CORPUS
from .sshd_fixture import sshd  # noqa: F401
from .test_containers import READY as CONTAINER_READY
from .test_containers import fake_cli  # noqa: F401

SGLANG = CORPUS / "sglang/docs-2025-05-no-tp0-prefix-ready.log"


def bw(env: dict[str, str], *args: str) -> tuple[int, dict]:
    p = subprocess.run([sys.executable, "-m", "bootwatch", *args], capture_output=True, text=True, timeout=60, env=env)
    assert "Traceback" not in p.stderr, p.stderr
    last = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    return p.returncode, json.loads(last[-1]) if last else {"stderr": p.stderr}


def test_wait_over_ssh_says_where_it_stands_and_then_ready(sshd, tmp_path: Path) -> None:  # noqa: F811
    lines = [ln + b"\n" for ln in SGLANG.read_bytes().rstrip(b"\n").split(b"\n")]
    log = tmp_path / "remote.log"
    log.write_bytes(b"".join(lines[: len(lines) // 2]))
    env = {**os.environ, "BOOTWATCH_SSH_CONFIG": str(sshd.config), "BOOTWATCH_HOME": str(tmp_path / "home")}
    source = f"ssh://{sshd.alias}{log}"
    code, s = bw(env, "watch", source, "--wait-at-most", "3s", "--json")
    assert code == 3, s
    first = s["standing"]
    assert first["state"] == "starting" and first["phase"] not in (None, "ready") and first["calls"] == 1
    with log.open("ab") as f:
        f.write(b"".join(lines[len(lines) // 2 :]))
    code, s = bw(env, "watch", source, "--wait-at-most", "20s", "--json")
    assert code == 0 and s["standing"]["state"] == "ready" and s["standing"]["calls"] == 2
    assert s["standing"]["new_lines"] == len(lines) - len(lines) // 2


def test_wait_on_a_container(fake_cli, tmp_path: Path) -> None:  # noqa: F811
    env = {**fake_cli(CONTAINER_READY, "ready"), "BOOTWATCH_HOME": str(tmp_path / "home")}
    code, s = bw(env, "watch", "docker://vllm", "--wait-at-most", "30s", "--json")
    assert code == 0 and s["standing"]["state"] == "ready" and s["standing"]["ready_line"], s
