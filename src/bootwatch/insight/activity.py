"""Samples what the server's process tree does while its log may be silent: bytes read (psutil io
counters), CPU seconds, compiler children. Counters of processes that ended are kept, so totals never go
backwards when a compiler child or a worker exits."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from bootwatch.insight.weights import Weights
from bootwatch.vocab.activity import Activity

# Processes whose presence means kernels are being built (torch inductor runs gcc; triton runs ptxas).
COMPILERS = frozenset(
    {
        "nvcc",
        "ninja",
        "cicc",
        "ptxas",
        "cc1",
        "cc1plus",
        "gcc",
        "g++",
        "c++",
        "cc",
        "clang",
        "clang++",
        "hipcc",
        "ld",
        "triton",
        "fatbinary",
        "nvlink",
    }
)
SAMPLE_EVERY_S = 1.0
LOAD_CAP = 0.99  # bytes read are not all weights: never claim the load is done before the log says so


@dataclass
class _Seen:
    read: int
    cpu: float
    base_read: int  # counters when first seen: a process found by --pid may have read a lot before
    base_cpu: float


def _title(p: psutil.Process) -> str:
    """vLLM and SGLang name their processes (VLLM::EngineCore); cmdline[0] has the name, comm is cut."""
    with contextlib.suppress(psutil.Error, IndexError):
        first = p.cmdline()[0]
        return os.path.basename(first.split(" ")[0]) or p.name()
    with contextlib.suppress(psutil.Error):
        return p.name()
    return "?"


class ActivitySampler:
    """Call `sample(now)` as often as convenient: it looks at the tree at most once a second."""

    def __init__(
        self, tree: Callable[[], list[psutil.Process]], weights: Weights | None = None, count_from_zero: bool = True
    ) -> None:
        self.tree = tree
        self.weights = weights
        self.count_from_zero = count_from_zero  # run: the tree is ours from its first byte
        self._seen: dict[tuple[int, float], _Seen] = {}
        self._gone_read = 0
        self._gone_cpu = 0.0
        self._last: Activity | None = None
        self._load_base: int | None = None

    def load_began(self) -> None:
        """The log says the weights load begins: bytes count from here."""
        self._load_base = self._last.read_bytes if self._last is not None else 0

    def _look(self) -> tuple[int, float, list[str], str, int]:
        alive: set[tuple[int, float]] = set()
        compilers: list[str] = []
        busiest: psutil.Process | None = None
        top = 0.0
        procs = self.tree()
        for p in procs:
            try:
                with p.oneshot():
                    key = (p.pid, p.create_time())
                    cpu_t = p.cpu_times()
                    cpu = cpu_t.user + cpu_t.system
                    try:
                        io = p.io_counters()
                        # read() calls count in read_chars (page cache too); mmap faults only in read_bytes
                        read = max(io.read_chars, io.read_bytes) if hasattr(io, "read_chars") else io.read_bytes
                    except (psutil.AccessDenied, AttributeError, NotImplementedError):
                        read = 0
                    name = p.name()
            except psutil.Error:
                continue
            alive.add(key)
            prev = self._seen.get(key)
            if prev is None:
                base_r, base_c = (0, 0.0) if self.count_from_zero else (read, cpu)
                prev = self._seen[key] = _Seen(base_r, base_c, base_r, base_c)
            if cpu - prev.cpu > top:
                top, busiest = cpu - prev.cpu, p
            prev.read, prev.cpu = read, cpu
            if name in COMPILERS or _title(p) in COMPILERS:
                compilers.append(name)
        for key in [k for k in self._seen if k not in alive]:
            gone = self._seen.pop(key)
            self._gone_read += gone.read - gone.base_read
            self._gone_cpu += gone.cpu - gone.base_cpu
        total_read = self._gone_read + sum(s.read - s.base_read for s in self._seen.values())
        total_cpu = self._gone_cpu + sum(s.cpu - s.base_cpu for s in self._seen.values())
        title = _title(busiest) if busiest is not None else ""
        return total_read, total_cpu, sorted(compilers), title, len(procs)

    def sample(self, now: float) -> Activity | None:
        last = self._last
        if last is not None and now - last.t < SAMPLE_EVERY_S:
            return last
        read, cpu, compilers, busiest, n = self._look()
        if n == 0 and last is None:
            return None
        dt = now - last.t if last is not None else 0.0
        read_bps = max(0.0, (read - last.read_bytes) / dt) if last is not None and dt > 0 else 0.0
        cores = max(0.0, (cpu - last.cpu_s) / dt) if last is not None and dt > 0 else 0.0
        total = self.weights.total_bytes if self.weights is not None else None
        done = eta = None
        if total:
            done = min(read - (self._load_base or 0), int(total * LOAD_CAP))
            done = max(done, 0)
            eta = (total - done) / read_bps if read_bps > 0 else None
        self._last = Activity(now, read, cpu, read_bps, cores, tuple(compilers), busiest, n, total, done, eta)
        return self._last


def tree_of(pid: int) -> Callable[[], list[psutil.Process]]:
    """The process `pid` and its descendants (for `watch --pid`)."""

    def tree() -> list[psutil.Process]:
        try:
            root = psutil.Process(pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    return tree


__all__ = ["COMPILERS", "ActivitySampler", "tree_of"]
