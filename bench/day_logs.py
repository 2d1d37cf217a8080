"""A day of serving: one real startup followed by many MB of the engine's own serving lines, read by bootwatch
and, side by side in one run, by the seed's grep loop (one pass) and `grep -c`.

    python bench/day_logs.py [--size-mb 200]

Two logs, cached under bench/out/ (git-ignored): SGLang (a real ready startup from the corpus, then `Decode
batch` lines, the way a loaded server prints one every few decode steps) and vLLM (a real ready startup, then
one `Avg prompt throughput` stats line per 40 access lines, as at ~100 requests/s). The serving lines are the
engines' own formats with numbers drawn from a seeded generator, so two runs measure the same bytes.

For each log it measures, each as a child process (CPU = user+sys of the child, peak RSS from GNU time):
- `report --json` to the end: wall, CPU, MB/s of CPU time, RSS;
- `watch --follow --json`: time to its first line (attached: "already ready since ..."), CPU, RSS, then SIGTERM;
- `watch --from-start --follow --json`: time until it follows the file (its inotify descriptor appears), CPU;
- the seed's grep loop, one pass (`grep -iE <errors>`, `grep "fired up"`, `tail -1`), and `grep -c`.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

try:
    from common import REPO
except ImportError:  # run as `python bench/day_logs.py` from elsewhere
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import REPO

OUT = REPO / "bench" / "out"
BW = str(REPO / ".venv" / "bin" / "bootwatch")
SGLANG_HEAD = REPO / "tests/corpus/sglang/2025-08-rtx5080-blackwell-mineru-image-qwen3-0.6b-low-avail-mem-ready.log"
VLLM_HEAD = REPO / "tests/corpus/vllm/v0.10.0-v1-no-prefix-qwen3-4b-modelscope-path-ready-serving.log"
GREP_ERRORS = "RuntimeError|Traceback.*most recent|CUDA error|ValueError"


def _sglang(rng: random.Random, i: int) -> bytes:
    s = 3 * 3600 + i // 50
    return (
        f"[2025-08-08 {s // 3600 % 24:02d}:{s // 60 % 60:02d}:{s % 60:02d}] Decode batch. #running-req: "
        f"{rng.randint(1, 64)}, #token: {rng.randint(40, 90000)}, token usage: 0.{rng.randint(0, 99):02d}, "
        f"cuda graph: True, gen throughput (token/s): {rng.uniform(100, 3000):.2f}, #queue-req: {rng.randint(0, 9)},\n"
    ).encode()


def _vllm(rng: random.Random, i: int) -> bytes:
    if i % 40 == 0:
        s = i // 40 * 10
        return (
            f"INFO 09-11 {12 + s // 3600 % 12:02d}:{s // 60 % 60:02d}:{s % 60:02d} [loggers.py:118] Engine 000: "
            f"Avg prompt throughput: {rng.uniform(0, 900):.1f} tokens/s, Avg generation throughput: "
            f"{rng.uniform(0, 3000):.1f} tokens/s, Running: {rng.randint(0, 64)} reqs, Waiting: 0 reqs, "
            f"GPU KV cache usage: {rng.uniform(0, 90):.1f}%, Prefix cache hit rate: 12.3%\n"
        ).encode()
    return (
        f"INFO:     10.0.{rng.randint(0, 255)}.{rng.randint(0, 255)}:{rng.randint(1024, 65535)} - "
        '"POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    ).encode()


def _head(path: Path, until: bytes) -> bytes:
    data = path.read_bytes()
    cut = data.find(until)
    return data[: data.find(b"\n", cut) + 1]


def day_log(engine: str, size_mb: int) -> Path:
    out = OUT / f"day-{engine}-{size_mb}mb.log"
    if out.exists():
        return out
    OUT.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    if engine == "sglang":
        head, line = SGLANG_HEAD.read_bytes().split(b"Decode batch")[0].rsplit(b"\n", 1)[0] + b"\n", _sglang
    else:
        head, line = _head(VLLM_HEAD, b"Application startup complete."), _vllm
    tmp = out.with_suffix(".tmp")
    with tmp.open("wb") as f:
        f.write(head)
        n, i, buf = len(head), 0, []
        while n < size_mb << 20:
            b = line(rng, i)
            buf.append(b)
            n, i = n + len(b), i + 1
            if len(buf) >= 10000:
                f.write(b"".join(buf))
                buf = []
        f.write(b"".join(buf))
    tmp.rename(out)
    return out


def _timed(argv: list[str]) -> tuple[float, float, int, bytes]:
    """wall s, CPU s (user+sys), peak RSS KiB, stdout of one child."""
    t0 = time.perf_counter()
    p = subprocess.Popen(["/usr/bin/time", "-f", "%M", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate()
    wall = time.perf_counter() - t0
    rss = int(err.decode().strip().splitlines()[-1])
    return wall, _children_cpu_delta(), rss, out


_last_children = [0.0]


def _children_cpu_delta() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = r.ru_utime + r.ru_stime
    delta, _last_children[0] = total - _last_children[0], total
    return delta


def _has_inotify(pid: int) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify" for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def attach(log: Path, from_start: bool) -> tuple[float, float, int, str]:
    """Time to first line (or, with --from-start, until it follows the file), CPU and peak RSS at that point."""
    argv = [BW, "watch", "--follow", "--json", str(log)] + (["--from-start"] if from_start else [])
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        if from_start:
            while not _has_inotify(p.pid) and p.poll() is None:
                time.sleep(0.005)
            first = "following"
        else:
            assert p.stdout is not None
            first = p.stdout.readline().decode()[:90]
        took = time.perf_counter() - t0
        cpu, rss = _cpu_of(p.pid), _rss_kib(p.pid)
    finally:
        p.terminate()
        p.communicate(timeout=60)
        _children_cpu_delta()
    return took, cpu, rss, first


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=200)
    args = ap.parse_args()
    mb = float(args.size_mb)
    print(f"cores: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.2f}, log size {args.size_mb} MB each")
    print("goals: report >= 200 MB/s of CPU; attached first word <= 1 s; RSS <= 100 MB")
    print()
    print("| log | method | wall s | CPU s | MB/s (CPU) | peak RSS MB | says |")
    print("|---|---|---:|---:|---:|---:|---|")
    _children_cpu_delta()
    for engine in ("sglang", "vllm"):
        log = day_log(engine, args.size_mb)
        rows = []
        wall, cpu, rss, out = _timed([BW, "report", "--json", str(log)])
        verdict = out.decode().split('"verdict": "', 1)[1].split('"', 1)[0] if out else "?"
        rows.append(("`report --json`", wall, cpu, rss, verdict))
        took, cpu, rss, first = attach(log, from_start=False)
        rows.append(("`watch --follow`: first line", took, cpu, rss, first.split('"text": "', 1)[-1][:40]))
        took, cpu, rss, _ = attach(log, from_start=True)
        rows.append(("`watch --from-start`: following", took, cpu, rss, ""))
        loop = f"grep -iE '{GREP_ERRORS}' {log} | tail -1; grep -c 'fired up' {log}; tail -1 {log}"
        wall, cpu, rss, _ = _timed(["sh", "-c", loop])
        rows.append(("grep loop, one pass", wall, cpu, rss, ""))
        wall, cpu, rss, out = _timed(["grep", "-ciE", GREP_ERRORS, str(log)])
        rows.append(("`grep -c`", wall, cpu, rss, f"{out.decode().strip()} hits"))
        for method, wall, cpu, rss, says in rows:
            speed = f"{mb / cpu:.1f}" if cpu > 0 and "first line" not in method else ""
            print(f"| {engine} | {method} | {wall:.2f} | {cpu:.2f} | {speed} | {rss / 1024:.0f} | {says} |")
    print()
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
