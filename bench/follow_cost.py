"""CPU cost of following a ready server at 1 Hz (its log and its /metrics): bootwatch's own CPU time over a
window after ready, as a share of one core. The server is the project's real llama-server (--metrics) or vLLM
CPU; scripts/real-servers prepares them.

    python bench/follow_cost.py [--engine llamacpp|vllm] [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

import psutil
from common import free_port, real_server_paths


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", choices=["llamacpp", "vllm"], default="llamacpp")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--baseline", action="store_true", help="no --url: no health probe, no /metrics (the log only)")
    a = ap.parse_args()
    p, port = real_server_paths(), free_port()
    if a.engine == "llamacpp":
        server = [
            p["BOOTWATCH_LLAMA_SERVER"],
            "-m",
            p["BOOTWATCH_TINY_GGUF"],
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "-c",
            "512",
            "--metrics",
        ]
    else:
        server = [
            "env",
            "HF_HUB_OFFLINE=1",
            "VLLM_LOG_STATS_INTERVAL=1",
            f"VLLM_CACHE_ROOT={p['BOOTWATCH_VLLM_CACHE_ROOT']}",
            p["BOOTWATCH_VLLM_PY"],
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            p["BOOTWATCH_TINY_MODEL"],
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--kv-cache-memory-bytes",
            "1073741824",
            "--enforce-eager",
        ]
    log = f"/tmp/bw-follow-cost-{os.getpid()}.log"
    url = [] if a.baseline else ["--url", f"http://127.0.0.1:{port}/health"]
    bw = subprocess.Popen(
        [sys.executable, "-m", "bootwatch", "run", "--json", "--log", log, *url, "--", *server],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert bw.stdout is not None
    for line in bw.stdout:
        if json.loads(line)["event"] == "ready":
            break
    me = psutil.Process(bw.pid)
    time.sleep(2.0)  # the scrape task starts at the first tick after ready
    c0, t0 = me.cpu_times(), time.monotonic()
    n = 0
    end = t0 + a.seconds
    while time.monotonic() < end:
        line = bw.stdout.readline()
        n += '"event": "serving"' in line
    c1, t1 = me.cpu_times(), time.monotonic()
    bw.send_signal(signal.SIGINT)
    bw.communicate(timeout=60)
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    what = "no --url" if a.baseline else "--url"
    print(
        f"engine={a.engine} {what} window={t1 - t0:.1f}s serving_events={n} bootwatch_cpu={cpu:.3f}s "
        f"share_of_one_core={100 * cpu / (t1 - t0):.2f}%"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
