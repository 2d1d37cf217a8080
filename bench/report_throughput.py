"""Throughput and peak memory of `bootwatch report --json` on a big log, side by side with the seed's grep.

The log is the real corpus (`<corpus>/*/*.log`, sorted) concatenated byte for byte, in whole passes, until it
holds at least the requested size; it is cached under bench/out/ (git-ignored), keyed by the corpus' content
and the size. Every measured command is a child process; its wall time comes from a monotonic clock and its
peak RSS is the ru_maxrss of that one process as GNU `/usr/bin/time -f %M` reports it (see `run_once`).

Run from the repo root:  python bench/report_throughput.py [--size-mb 200] [--corpus DIR]
MB means 2**20 bytes throughout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import corpus_blob, default_corpus

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "out"
MB = 1 << 20
GOAL_MBPS = 50.0
GOAL_RSS_MB = 100.0
GNU_TIME = Path("/usr/bin/time")
GOAL_LINE = "goal: >= 50 MB/s and <= 100 MB peak RSS whatever the size"
# The seed's shell loop: `grep -iE` over four error patterns plus the ready line, here as one counting pass.
GREP_PATTERN = "RuntimeError|Traceback.*most recent|CUDA error|ValueError|fired up"


@dataclass
class Sample:
    seconds: float  # wall
    cpu_seconds: float  # user + system of the child; steadier than wall time on a busy machine
    max_rss_mb: float
    stdout: bytes


@dataclass
class Row:
    tool: str
    size_bytes: int
    seconds: float
    max_rss_mb: float
    note: str

    @property
    def mbps(self) -> float:
        return self.size_bytes / MB / self.seconds


# ---------------------------------------------------------------------------------------------- the log


def build_log(blob: bytes, size_mb: float) -> Path:
    """A log of at least `size_mb` MB made of whole copies of `blob`, built once and cached."""
    passes = max(1, -(-int(size_mb * MB) // len(blob)))  # ceiling division
    digest = hashlib.sha256(blob).hexdigest()[:12]
    path = OUT / f"corpus-{digest}-x{passes}.log"
    if path.exists() and path.stat().st_size == passes * len(blob):
        return path
    OUT.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=OUT, prefix=".building-", suffix=".log")
    try:
        with os.fdopen(fd, "wb") as f:
            for _ in range(passes):
                f.write(blob)
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def build_one_launch(corpus: Path, size_mb: float) -> Path:
    """One launch of `size_mb`: a real ready SGLang log, then real decode-batch lines of a serving SGLang
    server repeated: the log of a server that started once and ran for days."""
    path = OUT / f"one-launch-x{int(size_mb)}.log"
    if path.exists() and path.stat().st_size >= size_mb * MB:
        return path
    head = (corpus / "sglang/docs-2025-05-no-tp0-prefix-ready.log").read_bytes()
    serving = corpus / "sglang/ascend-npu-multinode-pd-decode-worker-runtime-abort-garbled.log"
    stats = [x for x in serving.read_bytes().split(b"\n") if b"Decode batch" in x][:200]
    block = b"\n".join(stats) + b"\n"
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=OUT, delete=False) as f:
        f.write(head)
        written = len(head)
        while written < size_mb * MB:
            f.write(block)
            written += len(block)
    os.replace(f.name, path)
    return path


def warm_page_cache(path: Path) -> None:
    """Read the file once so that every measured run sees it in the page cache (both tools alike)."""
    with path.open("rb") as f:
        while f.read(8 * MB):
            pass


def expected_lines(path: Path) -> int:
    """Lines as bootwatch counts them: split on \\n, a last line without \\n still counts."""
    count, last = 0, b"\n"
    with path.open("rb") as f:
        while block := f.read(8 * MB):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


# ---------------------------------------------------------------------------------------------- measuring


def bootwatch_cmd() -> list[str]:
    script = Path(sys.executable).parent / "bootwatch"  # the venv's console script, not a resolved path
    return [str(script)] if script.exists() else [sys.executable, "-m", "bootwatch"]


def rss_method() -> str:
    return "GNU time %M" if GNU_TIME.exists() else "os.wait4 ru_maxrss (upper bound)"


def run_once(cmd: list[str], ok_codes: tuple[int, ...] = (0,)) -> Sample:
    """Run `cmd` with stdout to a temp file; wall time around spawn..reap, plus the child's peak RSS.

    Peak RSS comes from `/usr/bin/time -f %M` when present: a child forked by this Python process carries the
    parent's resident pages until it execs, and Linux folds that into its ru_maxrss, so `os.wait4` on a
    Popen pid over-reports a small tool like grep by the parent's size. GNU time forks from a ~2 MB process.
    Without it, fall back to `os.wait4` (an upper bound).
    """
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        wrapped = [str(GNU_TIME), "-f", "%M %U %S", "-o", tf.name, *cmd] if GNU_TIME.exists() else cmd
        start = time.perf_counter()
        proc = subprocess.Popen(wrapped, stdout=out)  # stderr passes through
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = code = os.waitstatus_to_exitcode(status)  # reaped here; keep Popen from waiting
        if GNU_TIME.exists():  # it exits with the command's code; "Command exited with ..." may come first
            rss, user, system = tf.read().split("\n")[-2].split()
            rss_kib, cpu = int(rss), float(user) + float(system)
        else:
            rss_kib, cpu = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
        out.seek(0)
        stdout = out.read()
    if code not in ok_codes:
        raise SystemExit(f"{' '.join(cmd)} exited {code}")
    return Sample(seconds=seconds, cpu_seconds=cpu, max_rss_mb=rss_kib / 1024, stdout=stdout)  # KiB -> MB


def median_sample(samples: list[Sample]) -> Sample:
    """Medians of wall time, CPU time and peak RSS, each on its own; stdout of the last run."""
    return Sample(
        seconds=statistics.median(s.seconds for s in samples),
        cpu_seconds=statistics.median(s.cpu_seconds for s in samples),
        max_rss_mb=statistics.median(s.max_rss_mb for s in samples),
        stdout=samples[-1].stdout,
    )


def goal_note(mbps: float, rss_mb: float) -> str:
    misses = [what for what, bad in (("throughput", mbps < GOAL_MBPS), ("RSS", rss_mb > GOAL_RSS_MB)) if bad]
    return "goal met" if not misses else "goal MISSED: " + " and ".join(misses)


def measure_side_by_side(log: Path, repeat: int) -> tuple[Sample, Sample]:
    """bootwatch and grep alternately on the same file, `repeat` times each; medians."""
    bw_cmd = [*bootwatch_cmd(), "report", "--json", str(log)]
    grep_cmd = ["grep", "-ciE", GREP_PATTERN, str(log)]
    bw, grep = [], []
    for _ in range(repeat):
        bw.append(run_once(bw_cmd))
        grep.append(run_once(grep_cmd, ok_codes=(0, 1)))  # grep exits 1 when nothing matched
    return median_sample(bw), median_sample(grep)


def measure_bootwatch(log: Path, repeat: int) -> Sample:
    cmd = [*bootwatch_cmd(), "report", "--json", str(log)]
    return median_sample([run_once(cmd) for _ in range(repeat)])


def bootwatch_row(log: Path, sample: Sample, label: str) -> Row:
    size = log.stat().st_size
    row = Row("bootwatch report --json", size, sample.seconds, sample.max_rss_mb, "")
    row.note = f"{label}; cpu {sample.cpu_seconds:.2f} s; {goal_note(row.mbps, row.max_rss_mb)}"
    return row


def bootwatch_code() -> Path:
    """The package directory the measured `bootwatch` imports (same interpreter and environment)."""
    probe = "import bootwatch, os; print(os.path.dirname(os.path.abspath(bootwatch.__file__)))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def code_fingerprint(pkg: Path) -> str:
    """A digest of the package's sources and rule files, to notice code that changed during the run."""
    h = hashlib.sha256()
    for f in sorted(pkg.rglob("*")):
        if f.suffix in (".py", ".toml") and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(pkg)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def git_state(pkg: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(pkg), "describe", "--always", "--dirty"], capture_output=True, text=True)
    except OSError:
        return "git not found"
    return f"git {out.stdout.strip()}" if out.returncode == 0 else "not a git checkout"


# ---------------------------------------------------------------------------------------------- output


def format_table(rows: list[Row]) -> str:
    header = ["tool", "MB/s", "peak RSS MB", "seconds", "note"]
    cells = [[r.tool, f"{r.mbps:.1f}", f"{r.max_rss_mb:.1f}", f"{r.seconds:.2f}", r.note] for r in rows]
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(len(header))]
    right = {1, 2, 3}

    def line(values: list[str]) -> str:
        padded = [v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths, strict=True))]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if i in right else "-" * (w + 2) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule, *(line(c) for c in cells)])


def cores() -> str:
    total = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else total
    return f"{total}" if usable == total else f"{total} ({usable} usable by this process)"


def verdict_lines(summary: dict[str, Any], log: Path) -> list[str]:
    out = [
        f"bootwatch verdict on {log.name}: {summary.get('verdict')} (engine {summary.get('engine')}, "
        f"version {summary.get('engine_version')})"
    ]
    for key in ("failure", "ready"):
        if summary.get(key):
            out.append(f"  {key}: line {summary[key].get('line_no')}: {summary[key].get('text')}")
    out.append(
        f"  lines read: {summary.get('lines')} (the file has {expected_lines(log)}); "
        f"launches seen: {summary.get('launches')}"
    )
    return out


# ---------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size-mb", type=float, default=200.0, help="size of the main log in MB (default 200)")
    p.add_argument(
        "--also-size-mb",
        type=float,
        default=None,
        help="also run bootwatch on a log of this size to show flat RSS (default 2x --size-mb; 0: skip)",
    )
    p.add_argument(
        "--corpus",
        type=Path,
        default=None,
        help="directory of <engine>/*.log (default $BOOTWATCH_CORPUS or tests/corpus)",
    )
    p.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is reported (default 3)")
    return p.parse_args(argv)


def progress(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def prepared(blob: bytes, size_mb: float) -> Path:
    progress(f"building/reusing a >= {size_mb:g} MB log under {OUT}")
    log = build_log(blob, size_mb)
    warm_page_cache(log)
    return log


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pkg = bootwatch_code()
    before, load_before = code_fingerprint(pkg), os.getloadavg()[0]
    corpus = args.corpus or default_corpus()
    also = 2 * args.size_mb if args.also_size_mb is None else args.also_size_mb
    blob = corpus_blob(corpus)

    log = prepared(blob, args.size_mb)
    size = log.stat().st_size
    progress(f"bootwatch and grep, {args.repeat} runs each, on {log.name}")
    bw, grep = measure_side_by_side(log, args.repeat)
    rows = [
        bootwatch_row(log, bw, f"{size / MB:.0f} MB file"),
        Row(
            "grep -ciE PATTERNS (seed)",
            size,
            grep.seconds,
            grep.max_rss_mb,
            f"{size / MB:.0f} MB file; cpu {grep.cpu_seconds:.2f} s; {int(grep.stdout or 0)} matching lines",
        ),
    ]
    verdicts = [(log, bw)]
    if also > 0:
        big = prepared(blob, also)
        progress(f"bootwatch, {args.repeat} runs, on {big.name}")
        big_bw = measure_bootwatch(big, args.repeat)
        rows.append(bootwatch_row(big, big_bw, f"{big.stat().st_size / MB:.0f} MB file (larger)"))
        verdicts.append((big, big_bw))

    progress(f"bootwatch --exhaustive (reads every launch), 1 run, on {log.name}")
    ex = run_once([*bootwatch_cmd(), "report", "--json", "--exhaustive", str(log)])
    rows.append(
        Row(
            "bootwatch report --json --exhaustive",
            size,
            ex.seconds,
            ex.max_rss_mb,
            f"{size / MB:.0f} MB file, every launch read; cpu {ex.cpu_seconds:.2f} s; "
            f"{goal_note(size / MB / ex.seconds, ex.max_rss_mb)}",
        )
    )
    one = build_one_launch(corpus, args.size_mb)
    warm_page_cache(one)
    progress(f"bootwatch, {args.repeat} runs, on {one.name}")
    one_bw = measure_bootwatch(one, args.repeat)
    rows.append(bootwatch_row(one, one_bw, f"{one.stat().st_size / MB:.0f} MB, ONE launch (ready, then serving)"))
    verdicts.append((one, one_bw))

    after, load_after = code_fingerprint(pkg), os.getloadavg()[0]
    print(f"bootwatch code: {pkg} ({git_state(pkg)}; sources {before})")
    if after != before:
        print(f"WARNING: bootwatch's sources changed during the run ({before} -> {after}); the rows mix versions")
    print(f"file: {log} ({size:,} bytes = {size / MB:.1f} MB; the {len(blob):,}-byte corpus x {size // len(blob)})")
    print(f"corpus: {corpus} ({len(sorted(corpus.glob('*/*.log')))} logs, sorted by path, concatenated as is)")
    print(
        f"cores: {cores()}; load average {load_before:.2f} at start, {load_after:.2f} at end; "
        f"python {sys.version.split()[0]}; LANG={os.environ.get('LANG', '')} LC_ALL={os.environ.get('LC_ALL', '')}"
    )
    print(f"bootwatch: {' '.join(bootwatch_cmd())} report --json FILE")
    print(f"grep:      grep -ciE '{GREP_PATTERN}' FILE   (PATTERNS in the table)")
    print(f"median of {args.repeat} runs each, page cache warm; MB = 2**20 bytes; peak RSS via {rss_method()}")
    print(GOAL_LINE)
    print()
    print(format_table(rows))
    print()
    for path, sample in verdicts:
        print("\n".join(verdict_lines(json.loads(sample.stdout), path)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
