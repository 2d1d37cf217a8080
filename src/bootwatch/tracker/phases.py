"""The canonical phase vocabulary and the phase timeline of one launch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ORDER = (
    "start",
    "config",
    "download",
    "distributed_init",
    "load_weights",
    "load_draft",
    "compile",
    "kv_cache",
    "cuda_graph",
    "warmup",
    "ready",
)
RANK = {name: i for i, name in enumerate(ORDER)}


@dataclass
class Phase:
    name: str
    start_line: int
    start_t: float | None
    end_line: int | None = None
    end_t: float | None = None
    n: int | None = None
    total: int | None = None
    done: bool = False
    draft: bool = False
    # The log's own clock, where its lines carry one (`t` above is the decision clock: arrival time when live).
    start_log_t: float | None = None
    end_log_t: float | None = None
    # Begun in what a watch read of the past at once: arrival times there say nothing of how long it took.
    caught_up: bool = False

    @property
    def progress(self) -> float | None:
        if self.done:
            return 1.0
        if self.total:
            return min(1.0, (self.n or 0) / self.total)
        return None

    @property
    def duration(self) -> float | None:
        if self.caught_up:
            # Read in one go by a watch that started later: only the log's own timestamps know how long it took.
            start, end = self.start_log_t, self.end_log_t
        else:
            start, end = self.start_t, self.end_t
        if start is None or end is None:
            return None
        return max(0.0, end - start)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "duration_s": None if self.duration is None else round(self.duration, 3),
            "progress": None if self.progress is None else round(self.progress, 4),
        }
        if self.total:
            d["n"], d["total"] = self.n, self.total
        if self.draft:
            d["draft"] = True
        return d
