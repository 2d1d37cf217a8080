"""Soak: 50 `bootwatch run`s of the stand-in server, each killed at a random moment (the server or bootwatch,
by SIGKILL, SIGTERM, SIGINT or SIGHUP). Afterwards nothing of ours runs, every log is byte for byte what
the server wrote, and history holds every run whose bootwatch lived to record it. Loopback only, no network.
BOOTWATCH_SOAK_SEED replays a failing seed."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from .conftest import CORPUS, HELPER, assert_none_left
from .test_run_lifecycle import ours

BOOTWATCH = [sys.executable, "-m", "bootwatch"]
SOURCES = [
    CORPUS / "vllm/v0.11-elloraa-gloo-ready.log",
    CORPUS / "sglang/docs-2025-05-no-tp0-prefix-ready.log",
    CORPUS / "sglang/rocm-rdna4-tp2-oom-during-weight-load-one-rank.log",
]
RUNS = 50
AT_ONCE = 3
SIGNALS = [signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP]


@dataclass
class Outcome:
    i: int
    log: Path
    journal: Path
    source: Path
    target: str
    sig: int
    returncode: int
    stderr: str
    server_pids: list[int]
    elapsed: float


def one_run(i: int, seed: int, tmp: Path, env: dict[str, str]) -> Outcome:
    r = random.Random(seed * 1000 + i)
    log, journal, pidfile = tmp / f"run{i}.log", tmp / f"run{i}.journal", tmp / f"run{i}.pids"
    source = r.choice(SOURCES)
    # SIGINT is ignored until the stand-in sets its own handler: a Ctrl-C in the middle of Python's startup
    # would print a traceback into the log, and the log must be exactly the lines the stand-in wrote.
    server = [
        "sh",
        "-c",
        'trap "" INT; exec "$@"',
        "sh",
        sys.executable,
        str(HELPER),
        str(source),
        "--scale",
        f"{r.uniform(0.001, 0.02):.4f}",
        "--max-gap",
        "0.05",
        "--then",
        r.choice(["hang", "serve", "exit:0", "exit:1"]),
        "--journal",
        str(journal),
        "--pidfile",
        str(pidfile),
    ]
    if r.random() < 0.5:
        server += ["--child", "bwtest-soak-child"]
    kept_mark = tmp / f"run{i}.then-done"
    extra = r.choice([[], ["--then", "sleep 0.3"], ["--keep", "--then", f"touch {kept_mark}"]])
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [*BOOTWATCH, "run", "--log", str(log), "--json", "--timeout", "60", "--stall", "1h", *extra, "--", *server],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    time.sleep(r.uniform(0.2, 2.5))
    target, sig = r.choice(["server", "bootwatch"]), r.choice(SIGNALS)
    server_procs: list[psutil.Process] = []
    if pidfile.exists() and pidfile.read_text().endswith("\n"):
        for pid in pidfile.read_text().split():
            try:
                server_procs.append(psutil.Process(int(pid)))
            except psutil.Error:
                continue
    if target == "server" and server_procs:
        with contextlib.suppress(psutil.Error):
            server_procs[0].send_signal(sig)  # psutil refuses a pid that was reused meanwhile
    else:
        target = "bootwatch"
        proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        # The server was killed but bootwatch did not notice in 40 s: that is a failure of its own.
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        err += "\n[soak] bootwatch was still running 40 s after the server was killed"
    # --keep after a successful --then: the server runs on by design; the test stops it. Its mark says --then ran to
    # its end: a SIGKILL after that (before bootwatch exited) leaves the kept server running too, as it should.
    kept = "--keep" in extra and (proc.returncode == 0 or kept_mark.exists())
    if kept:
        for p in server_procs:
            with contextlib.suppress(OSError):
                os.killpg(p.pid, signal.SIGTERM)
    return Outcome(
        i, log, journal, source, target, sig, proc.returncode, err, [p.pid for p in server_procs], time.monotonic() - t0
    )


@pytest.mark.slow
def test_soak_random_kills_leave_nothing_running_and_lose_no_byte(tmp_path: Path) -> None:
    seed = int(os.environ.get("BOOTWATCH_SOAK_SEED", random.randrange(1 << 30)))
    env = {**os.environ, "BOOTWATCH_HOME": str(tmp_path / "home")}
    with ThreadPoolExecutor(AT_ONCE) as pool:
        outcomes = list(pool.map(lambda i: one_run(i, seed, tmp_path, env), range(RUNS)))
    where = f"(seed {seed}; BOOTWATCH_SOAK_SEED={seed} replays it)"

    deadline = time.time() + 15.0
    while ours() and time.time() < deadline:
        time.sleep(0.2)
    left = {p.pid for p in ours()}
    runs = [
        (o.i, o.target, signal.Signals(o.sig).name, o.returncode, o.server_pids, o.elapsed)
        for o in outcomes
        if left & set(o.server_pids)
    ]
    assert_none_left(ours, f"processes of the soak's runs {where}: {runs}", grace_s=0.1)

    for o in outcomes:
        what = f"run {o.i}: {o.target} got {signal.Signals(o.sig).name}, bootwatch exited {o.returncode} {where}"
        assert "Traceback" not in o.stderr and "[soak]" not in o.stderr, f"{what}\n{o.stderr}"
        if o.target == "bootwatch" and o.sig == signal.SIGKILL:
            assert o.returncode in (-signal.SIGKILL, 0, 1), what
        elif o.target == "bootwatch":
            # 128+N, unless bootwatch had already finished (the server exited first) when the signal came,
            # or had not yet started anything (its handlers are installed before the server starts).
            assert o.returncode in (0, 1, 128 + o.sig) or (o.returncode == -o.sig and not o.server_pids), what
        else:
            assert o.returncode in (0, 1), what
        written = o.log.read_bytes() if o.log.exists() else b""
        source = o.source.read_bytes()
        assert source.startswith(written) and (not written or written.endswith(b"\n")), (
            f"{what}: the log is not what the server wrote"
        )
        lines = written.count(b"\n")
        journaled = int(o.journal.read_text().strip() or 0) if o.journal.exists() else 0
        # The journal is written after each line: a kill between the two leaves it one behind.
        assert lines in (journaled, journaled + 1), f"{what}: {lines} lines in the log, {journaled} written"

    p = subprocess.run(
        [*BOOTWATCH, "history", "--json", "--limit", "1000"], env=env, capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stderr
    sources = [json.loads(x)["source"] for x in p.stdout.splitlines()]
    for o in outcomes:
        n = sources.count(str(o.log))
        if not o.log.exists():  # stopped before it started the server (a log nobody wrote to is removed)
            assert n == 0
        elif o.target == "bootwatch" and o.sig == signal.SIGKILL:
            assert n <= 1, f"run {o.i} recorded {n} times {where}"
        else:
            assert n == 1, (
                f"run {o.i} ({o.target} got {signal.Signals(o.sig).name}) is in history {n} times {where}; "
                f"exit {o.returncode} after {o.elapsed:.2f} s; stderr: {o.stderr[-500:]!r}"
            )
