"""ssh:// sources against a real OpenSSH server on 127.0.0.1 (started by the tests, with its own host key,
user key and port; scripts/sshd-test-server installs Debian's openssh-server)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from bootwatch.sources.spec import parse_source
from bootwatch.sources.ssh import SshFollower

from .conftest import CORPUS, HELPER
from .sshd_fixture import sshd, sshd_wrong_clientkey, sshd_wrong_hostkey  # noqa: F401

READY = CORPUS / "sglang/docs-2025-05-no-tp0-prefix-ready.log"
FAILED = CORPUS / "sglang/rocm-rdna4-tp2-oom-during-weight-load-one-rank.log"
BIG = CORPUS / "vllm/v0.22-tp2-t4-lora-ready-shm-wait-then-worker-crash.log"


def bw(config: Path, *args: str, timeout: float = 120) -> tuple[int, list[dict], str]:
    env = {**os.environ, "BOOTWATCH_SSH_CONFIG": str(config)}
    p = subprocess.run(
        [sys.executable, "-m", "bootwatch", *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")], p.stderr


def test_watch_over_ssh_follows_a_startup_being_written(sshd, tmp_path: Path) -> None:  # noqa: F811
    log = tmp_path / "remote.log"
    writer = subprocess.Popen([sys.executable, str(HELPER), str(READY), "--out", str(log), "--scale", "0.05"])
    try:
        code, events, _ = bw(sshd.config, "watch", f"ssh://{sshd.alias}{log}", "--json", "--timeout", "60")
    finally:
        writer.wait(timeout=30)
    assert code == 0 and events[-1]["verdict"] == "ready"
    assert events[-1]["ready"]["text"] == "The server is fired up and ready to roll!"


def test_scp_style_source_and_failure(sshd, tmp_path: Path) -> None:  # noqa: F811
    log = tmp_path / "failed.log"
    log.write_bytes(FAILED.read_bytes())
    code, events, _ = bw(sshd.config, "watch", f"{sshd.alias}:{log}", "--json", "--from-start", "--timeout", "60")
    assert code == 1 and events[-1]["failure"]["text"].startswith("torch.OutOfMemoryError")


def test_dropped_connection_resumes_at_the_exact_byte(sshd, tmp_path: Path) -> None:  # noqa: F811
    """Kill the sshd child serving the stream mid-startup, three times: the joined output equals the file."""
    log = tmp_path / "growing.log"
    data = BIG.read_bytes()
    log.write_bytes(b"")
    done = threading.Event()

    def write() -> None:
        with log.open("ab", buffering=0) as f:
            for i in range(0, len(data), 997):  # partial lines on purpose
                f.write(data[i : i + 997])
                time.sleep(0.01)
        done.set()

    async def follow() -> bytes:
        os.environ["BOOTWATCH_SSH_CONFIG"] = str(sshd.config)
        follower = SshFollower(parse_source(f"ssh://{sshd.alias}{log}"))
        got = b""
        kills = 0

        async def killer() -> None:
            nonlocal kills
            while not done.is_set():
                await asyncio.sleep(0.25)
                if kills < 3 and sshd.kill_connections():
                    kills += 1

        k = asyncio.create_task(killer())
        try:
            async for chunk in follower.chunks():
                got += chunk
                if done.is_set() and len(got) >= len(data.rsplit(b"\n", 1)[0]) + 1:
                    break
        finally:
            k.cancel()
            await follower.aclose()
        assert kills >= 1 and follower.reconnects >= 1
        return got

    threading.Thread(target=write, daemon=True).start()
    got = asyncio.run(asyncio.wait_for(follow(), 120))
    assert got == data[: len(got)] and len(got) >= len(data.rsplit(b"\n", 1)[0])


def test_hostile_path_is_data_not_a_command(sshd, tmp_path: Path) -> None:  # noqa: F811
    weird = tmp_path / "with space 'quote' \"dq\" $(touch PWNED) `touch PWNED2`; touch PWNED3"
    weird.mkdir()
    log = weird / "server.log"
    log.write_bytes(READY.read_bytes())
    code, events, _ = bw(sshd.config, "watch", f"ssh://{sshd.alias}{log}", "--json", "--from-start", "--timeout", "30")
    assert code == 0 and events[-1]["verdict"] == "ready"
    home = Path(os.path.expanduser("~"))
    for name in ("PWNED", "PWNED2", "PWNED3"):
        assert not (home / name).exists() and not (tmp_path / name).exists() and not Path(name).exists()


def test_error_messages(sshd, sshd_wrong_hostkey, sshd_wrong_clientkey, tmp_path: Path) -> None:  # noqa: F811
    log = tmp_path / "x.log"
    log.write_bytes(READY.read_bytes())
    cases = [
        (sshd_wrong_hostkey.config, f"ssh://{sshd.alias}{log}", "host key"),
        (sshd_wrong_clientkey.config, f"ssh://{sshd.alias}{log}", "authentication"),
        (sshd.config, f"ssh://{sshd.alias}{tmp_path}/missing.log", "no such file"),
        (sshd.config, f"ssh://127.0.0.1:1{log}", "refused"),
        (sshd.config, f"ssh://no-such-host.invalid{log}", "cannot resolve"),
    ]
    for config, source, words in cases:
        code, _, err = bw(config, "watch", source, "--timeout", "30")
        assert code == 2, (source, err)
        assert err.startswith("bootwatch: ") and words in err, (source, err)


def test_multi_node_failure_names_the_node(sshd, tmp_path: Path) -> None:  # noqa: F811
    head, worker = tmp_path / "head.log", tmp_path / "worker.log"
    lines = READY.read_bytes().split(b"\n")
    head.write_bytes(b"\n".join(lines[:12]) + b"\n")  # node 1 still loading
    worker.write_bytes(FAILED.read_bytes())  # node 2 (over ssh) died
    code, events, _ = bw(
        sshd.config, "watch", str(head), f"ssh://{sshd.alias}{worker}", "--json", "--from-start", "--timeout", "60"
    )
    s = events[-1]
    assert code == 1 and s["verdict"] == "failed"
    assert s["failure"]["node"] == sshd.alias and s["failure"]["text"].startswith("torch.OutOfMemoryError")
    assert [n["verdict"] for n in s["nodes"]] == ["incomplete", "failed"]


def test_multi_node_stall_names_the_silent_node(sshd, tmp_path: Path) -> None:  # noqa: F811
    head, worker = tmp_path / "head.log", tmp_path / "worker.log"
    lines = READY.read_bytes().split(b"\n")
    cut = next(i for i, x in enumerate(lines) if b"Init torch distributed begin" in x) + 1
    worker.write_bytes(b"\n".join(lines[:cut]) + b"\n")  # silent in distributed init
    writer = subprocess.Popen(
        [sys.executable, str(HELPER), str(READY), "--out", str(head), "--lines", "14", "--then", "hang"]
    )
    try:
        code, events, _ = bw(
            sshd.config,
            "watch",
            str(head),
            f"ssh://{sshd.alias}{worker}",
            "--json",
            "--from-start",
            "--stall",
            "2",
            "--timeout",
            "60",
        )
    finally:
        writer.kill()
        writer.wait()
    stall = [e for e in events if e["event"] == "stall"]
    assert code == 4
    assert any(
        e["node"] == sshd.alias and e["phase"] == "distributed_init" and "head.log at " in e["message"] for e in stall
    ), stall


def test_each_follows_independent_servers(tmp_path: Path) -> None:
    logs = []
    for i, src in enumerate((READY, READY, FAILED)):
        p = tmp_path / f"replica{i}.log"
        p.write_bytes(src.read_bytes())
        logs.append(str(p))
    code, events, _ = bw(Path("/dev/null"), "watch", "--each", *logs[:2], "--json", "--from-start", "--timeout", "30")
    assert code == 0 and [s["verdict"] for s in events[-1]["servers"]] == ["ready", "ready"]
    code, events, _ = bw(Path("/dev/null"), "watch", "--each", *logs, "--json", "--from-start", "--timeout", "30")
    assert code == 1 and [s["verdict"] for s in events[-1]["servers"]] == ["ready", "ready", "failed"]


def test_each_times_out_with_124(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_bytes(b"")
    b.write_bytes(b"")
    code, events, _ = bw(
        Path("/dev/null"), "watch", "--each", str(a), str(b), "--json", "--timeout", "1.5", "--stall", "1h"
    )
    assert code == 124 and events[-1]["verdict"] == "timeout"
