"""Ready-detection lag against the real servers (scripts/real-servers prepares them).

For each trial, `bootwatch run --detach --json -- SERVER` starts the server; this script polls the server's
health URL every 5 ms on its own and notes the first 200. Lag = bootwatch's exit - that first 200 (negative
when bootwatch saw the ready line in the log before the URL answered). The server is stopped after each trial.

Run from the repo root:  python bench/real_servers_lag.py [--trials 5]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
from common import free_port, real_server_paths

REPO = Path(__file__).resolve().parent.parent
BOOTWATCH = [str(REPO / ".venv" / "bin" / "bootwatch")]


def commands(p: dict[str, str], port: int) -> dict[str, list[str]]:
    return {
        "vLLM 0.32 (CPU)": [
            "env",
            "HF_HUB_OFFLINE=1",
            f"VLLM_CACHE_ROOT={p['BOOTWATCH_VLLM_CACHE_ROOT']}",
            p["BOOTWATCH_VLLM_PY"],
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            p["BOOTWATCH_TINY_MODEL"],
            "--served-model-name",
            "tiny",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--kv-cache-memory-bytes",
            "1073741824",
            "--enforce-eager",
        ],
        "llama-server (-c 4000000)": [
            p["BOOTWATCH_LLAMA_SERVER"],
            "-m",
            p["BOOTWATCH_TINY_GGUF"],
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "-c",
            "4000000",
        ],
    }


def first_200(url: str, stop: threading.Event, out: list[float]) -> None:
    with httpx.Client(timeout=0.5, trust_env=False) as client:
        while not stop.is_set():
            try:
                if client.get(url).status_code == 200:
                    out.append(time.time())
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.005)


def trial(name: str, p: dict[str, str], log: Path) -> tuple[float, float]:
    port = free_port()
    cmd = commands(p, port)[name]
    stop, seen = threading.Event(), []
    poller = threading.Thread(target=first_200, args=(f"http://127.0.0.1:{port}/health", stop, seen), daemon=True)
    start = time.time()
    poller.start()
    proc = subprocess.run(
        [*BOOTWATCH, "run", "--detach", "--log", str(log), "--timeout", "300", "--", *cmd],
        capture_output=True,
        text=True,
        timeout=400,
    )
    exited = time.time()
    poller.join(timeout=60)
    stop.set()
    pid = int(proc.stdout.split("server pid ")[1].split()[0]) if "server pid " in proc.stdout else None
    if pid:
        with_group_stop(pid)
    if proc.returncode != 0 or not seen:
        raise RuntimeError(f"{name}: bootwatch exit {proc.returncode}, health 200 seen: {bool(seen)}\n{proc.stderr}")
    return exited - seen[0], seen[0] - start


def with_group_stop(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(200):
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.killpg(pid, signal.SIGKILL)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=5)
    args = ap.parse_args()
    p = real_server_paths()
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    print(
        f"cores: {os.cpu_count()}; {args.trials} trials each; lag = bootwatch exit (run --detach) - first 200 "
        "from the health URL polled every 5 ms by this script"
    )
    print(f"{'server':<28} {'ready after (p50)':>18} {'lag p50':>10} {'lag max':>10} {'lag min':>10}")
    for name in commands(p, 0):
        lags, readies = [], []
        for i in range(args.trials):
            lag, ready = trial(name, p, out / f"real-lag-{i}.log")
            lags.append(lag * 1000)
            readies.append(ready)
        print(
            f"{name:<28} {statistics.median(readies):>16.1f} s {statistics.median(lags):>7.1f} ms "
            f"{max(lags):>7.1f} ms {min(lags):>7.1f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
