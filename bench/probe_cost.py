"""What one `bootwatch probe` costs: wall time and CPU (user+sys) per call, as a kubelet would run it.

    python bench/probe_cost.py [--calls 30]

Cases: the state file of a watcher (ready; starting with --stall, which loads the stall policy), and the
log fallback on a small real log, and on a 100 MiB log made of the corpus (its last launch is read). Each
call is a fresh process of the venv's console script, as an exec probe is; CPU comes from os.wait4 of the
child. Prints a markdown table (median and p95 wall, median CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    from common import REPO, corpus_blob, default_corpus
except ImportError:  # run as a module
    from bench.common import REPO, corpus_blob, default_corpus

BOOTWATCH = str(REPO / ".venv" / "bin" / "bootwatch")


def one(args: list[str]) -> tuple[float, float, int]:
    start = time.perf_counter()
    p = subprocess.Popen([BOOTWATCH, "probe", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, p.returncode


def measure(args: list[str], calls: int) -> dict[str, float]:
    one(args)  # page cache warm, as on a node that probes every few seconds
    walls, cpus, codes = [], [], set()
    for _ in range(calls):
        w, c, code = one(args)
        walls.append(w)
        cpus.append(c)
        codes.add(code)
    walls.sort()
    return {
        "wall_p50_ms": statistics.median(walls) * 1000,
        "wall_p95_ms": walls[int(len(walls) * 0.95) - 1] * 1000,
        "cpu_p50_ms": statistics.median(cpus) * 1000,
        "exit": float(min(codes) if len(codes) == 1 else -1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=30)
    opts = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bw-probe-bench-"))
    now = time.time()
    base = {
        "version": 1,
        "pid": os.getpid(),
        "started": now,
        "source": str(tmp / "nolog"),
        "progress": None,
        "last_event": now,
        "stall_warning": False,
        "root_cause": None,
        "server_pid": os.getpid(),
    }
    ready = tmp / "ready.json"
    ready.write_text(json.dumps({**base, "state": "ready", "phase": "ready", "heartbeat": now + 3600}))
    starting = tmp / "starting.json"
    starting.write_text(json.dumps({**base, "state": "starting", "phase": "load_weights", "heartbeat": now + 3600}))
    small = REPO / "tests" / "corpus" / "vllm" / "v0.11-elloraa-gloo-ready.log"
    big = tmp / "big.log"
    blob = corpus_blob(default_corpus())
    with big.open("wb") as f:
        while f.tell() < 100 * 2**20:
            f.write(blob)
    cases = [
        ("state file, ready", ["--state", str(ready)]),
        ("state file, starting, --stall 10m", ["--state", str(starting), "--stall", "10m"]),
        (f"log, {small.stat().st_size // 1024} KiB real vLLM log", [str(small)]),
        (f"log, {big.stat().st_size // 2**20} MiB (the corpus, appended)", [str(big)]),
    ]
    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}, {opts.calls} calls per case\n")
    print("| case | wall p50 | wall p95 | CPU p50 | exit |")
    print("|---|---:|---:|---:|---:|")
    for name, args in cases:
        r = measure(args, opts.calls)
        print(
            f"| {name} | {r['wall_p50_ms']:.0f} ms | {r['wall_p95_ms']:.0f} ms | {r['cpu_p50_ms']:.0f} ms | "
            f"{r['exit']:.0f} |"
        )
    big.unlink()
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
