"""What moves in the server's process tree, as one typed sample: the verdict machine reads it (a stall is
declared only when nothing moves) and the sinks show it. Pure data: sampling it is insight/activity.py's job."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from bootwatch.durations import fmt_duration

# Below these a tree is idle: a stuck server still reads a few bytes (/proc, a heartbeat) and uses a little
# CPU in background threads.
READING_BPS = 512 * 1024
BUSY_CORES = 0.15


def fmt_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


@dataclass(frozen=True)
class Activity:
    """One sample of the tree: rates are over the last interval, so they say what moves now."""

    t: float
    read_bytes: int  # read by the tree since the watch began (dead processes' share kept)
    cpu_s: float  # CPU seconds of the tree since the watch began
    read_bps: float  # over the last interval
    cpu_cores: float  # over the last interval, in cores
    compilers: tuple[str, ...] = ()  # names of compiler processes running now (nvcc, ninja, cicc, ...)
    busiest: str = ""  # the process that used the most CPU in the interval
    processes: int = 0
    weights_total: int | None = None  # size of the model's weight files, when found
    weights_read: int | None = None  # read since the load began (capped just below the total)
    eta_s: float | None = None  # the rest of the weights at the recent rate

    @property
    def reading(self) -> bool:
        return self.read_bps >= READING_BPS

    @property
    def busy(self) -> bool:
        return self.cpu_cores >= BUSY_CORES

    def moved(self, phase: str) -> bool:
        """Anything that says the startup is getting on. CPU alone does not count while ranks rendezvous:
        a rank spinning on a barrier that will never open uses a whole core."""
        return self.reading or bool(self.compilers) or (self.busy and phase != "distributed_init")

    @property
    def kind(self) -> str:
        """The main thing moving, to tell a change of activity from more of the same."""
        if self.compilers:
            return "compiling"
        if self.reading:
            return "reading"
        return "cpu" if self.busy else "idle"

    def describe(self) -> str:
        parts = []
        if self.compilers:
            counts = Counter(self.compilers)
            n = sum(counts.values())
            what = ", ".join(f"{c} {name}" for name, c in counts.most_common())
            parts.append(f"compiling kernels: {n} compiler process{'es' if n > 1 else ''} ({what})")
        if self.reading:
            if self.weights_total:
                done = self.weights_read or 0
                eta = f", ETA {fmt_duration(self.eta_s)}" if self.eta_s is not None else ""
                parts.append(
                    f"reading weights at {fmt_bytes(self.read_bps)}/s ({done / self.weights_total:.0%} "
                    f"of {fmt_bytes(self.weights_total)}{eta})"
                )
            else:
                parts.append(f"reading at {fmt_bytes(self.read_bps)}/s")
        if self.busy:
            where = f" in {self.busiest}" if self.busiest else ""
            parts.append(f"CPU busy{where} ({self.cpu_cores:.1f} cores)")
        return "; ".join(parts) or "nothing moves"

    def to_json(self) -> dict[str, object]:
        return {
            "read_bps": round(self.read_bps),
            "cpu_cores": round(self.cpu_cores, 2),
            "compilers": list(self.compilers),
            "busiest": self.busiest or None,
            "weights_total_bytes": self.weights_total,
            "weights_read_bytes": self.weights_read,
            "eta_s": None if self.eta_s is None else round(self.eta_s, 1),
        }


CHECKED = "no output, no reads, no CPU, no compiler running"

__all__ = ["BUSY_CORES", "CHECKED", "READING_BPS", "Activity", "fmt_bytes"]
