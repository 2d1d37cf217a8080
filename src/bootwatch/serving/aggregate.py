"""The serving numbers of a whole log or watch, for the summary's `serving` block."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bootwatch.serving.stats import ServingSample, Source

MAX_VALUES = 100_000  # a week of 1 Hz readings is 600k: beyond this, every other value is kept


def _quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile: a value that was really seen."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))]


@dataclass
class Aggregate:
    throughputs: list[float] = field(default_factory=list)  # log readings with requests running
    metrics_throughputs: list[float] = field(default_factory=list)
    accept_lens: list[float] = field(default_factory=list)
    accept_rates: list[float] = field(default_factory=list)
    samples: dict[str, int] = field(default_factory=dict)  # by source
    peak_running: int = 0
    peak_queue: int = 0
    peak_kv: float | None = None
    preemptions: int = 0
    failed: dict[str, int] = field(default_factory=dict)  # engines' request-error lines, by cause
    status: dict[str, int] = field(default_factory=dict)  # access lines, by HTTP status
    done: int = 0  # requests finished, from per-request lines (llama.cpp's timings, TGI's Success)
    first_t: float | None = None
    last_t: float | None = None

    def add(self, s: ServingSample) -> None:
        src = s.source  # the member is its value's key: `.value` on an enum costs more than the rest of this
        self.samples[src] = self.samples.get(src, 0) + 1
        if s.t is not None:
            self.first_t = s.t if self.first_t is None else min(self.first_t, s.t)
            self.last_t = s.t if self.last_t is None else max(self.last_t, s.t)
        if s.running is not None:
            self.peak_running = max(self.peak_running, s.running)
        if s.queued is not None:
            self.peak_queue = max(self.peak_queue, s.queued)
        if s.kv_usage is not None:
            self.peak_kv = s.kv_usage if self.peak_kv is None else max(self.peak_kv, s.kv_usage)
        if s.kind == "request":
            if s.status is not None:
                self.status[str(s.status)] = self.status.get(str(s.status), 0) + 1
            elif s.cause is not None:
                self.failed[s.cause] = self.failed.get(s.cause, 0) + 1
        elif s.kind in ("timing", "success"):
            self.done += 1
        busy = bool(s.running) or s.kind in ("timing", "success")
        if s.gen_tps is not None and busy:
            # /metrics repeats what the log says: its readings count only when the log has none.
            _keep(self.throughputs if src is Source.LOG else self.metrics_throughputs, s.gen_tps)
        if s.accept_len is not None:
            _keep(self.accept_lens, s.accept_len)
        if s.accept_rate is not None:
            _keep(self.accept_rates, s.accept_rate)
        if s.preemptions is not None:
            self.preemptions = (
                self.preemptions + s.preemptions if s.kind == "retract" else max(self.preemptions, s.preemptions)
            )

    def to_json(self) -> dict[str, Any] | None:
        if not self.samples:
            return None
        tps = self.throughputs or self.metrics_throughputs
        return {
            "samples": {str(k): v for k, v in self.samples.items()},
            "span_s": round(self.last_t - self.first_t, 1) if self.first_t is not None and self.last_t else None,
            "throughput_from": ("log" if self.throughputs else "metrics") if tps else None,
            "throughput_p50": round(_quantile(tps, 0.5), 2) if tps else None,
            "throughput_p90": round(_quantile(tps, 0.9), 2) if tps else None,
            "peak_running": self.peak_running,
            "peak_queue": self.peak_queue,
            "peak_kv_usage": round(self.peak_kv, 3) if self.peak_kv is not None else None,
            "mean_accept_len": round(sum(self.accept_lens) / len(self.accept_lens), 3) if self.accept_lens else None,
            "mean_accept_rate": round(sum(self.accept_rates) / len(self.accept_rates), 3)
            if self.accept_rates
            else None,
            "preemptions": self.preemptions,
            "requests": self.requests(),
        }

    def requests(self) -> dict[str, Any] | None:
        """Requests seen after ready and the refused or failed ones by cause: the engine's own error lines name
        the cause; where it prints none, the access lines' status codes stand for it."""
        if not (self.failed or self.status or self.done):
            return None
        failed = dict(self.failed) or {f"HTTP {k}": v for k, v in sorted(self.status.items()) if int(k) >= 400}
        seen = max(sum(self.status.values()), sum(self.failed.values()) + self.done)
        return {
            "seen": seen,
            "failed": sum(failed.values()),
            "by_cause": failed,
            "status": dict(sorted(self.status.items())),
        }


def _keep(values: list[float], v: float) -> None:
    values.append(v)
    if len(values) > MAX_VALUES:
        del values[::2]
