"""`history --suggest-probes`: startupProbe settings from the startups this machine has seen.

Per engine and model, the ready startups' time to ready gives a p95; the suggested probe gives it half as
long again plus one period before the kubelet gives up (failureThreshold x periodSeconds > 1.5 x p95 + period).
Strings go out as JSON, which is YAML too, so a model path cannot break the YAML.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bootwatch.store import StoredStartup

MARGIN = 1.5
MIN_THRESHOLD = 3


@dataclass(frozen=True)
class Suggestion:
    engine: str
    model: str | None
    count: int
    p50_s: float
    p95_s: float
    max_s: float
    period_s: int
    failure_threshold: int

    @property
    def budget_s(self) -> int:
        return self.period_s * self.failure_threshold


def percentile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of them at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def suggest(startups: list[StoredStartup]) -> list[Suggestion]:
    groups: dict[tuple[str, str | None], list[float]] = defaultdict(list)
    for s in startups:
        # A time to ready of 0 is no startup's: a log read after the fact with no clock of its own.
        if s.verdict == "ready" and s.time_to_ready_s is not None and s.time_to_ready_s > 0:
            groups[(s.engine, s.model)].append(s.time_to_ready_s)
    out = []
    for (engine, model), times in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        p95 = percentile(times, 0.95)
        # A probe every ~1/30 of the startup, between 5 s and 30 s: fine enough, and cheap (bench/probe_cost.py).
        period = int(min(30, max(5, round(p95 / 30))))
        # Never less than the slowest startup on record took, whatever the percentile says.
        threshold = max(MIN_THRESHOLD, math.ceil((max(p95 * MARGIN, max(times)) + period) / period))
        out.append(Suggestion(engine, model, len(times), percentile(times, 0.5), p95, max(times), period, threshold))
    return out


def render_yaml(suggestions: list[Suggestion], state_path: str = "/run/bootwatch/state.json") -> str:
    if not suggestions:
        return "# no ready startup in the history yet: nothing to suggest from\n"
    lines = []
    for s in suggestions:
        lines += [
            f"# {s.engine} {s.model or '(model unknown)'}: {s.count} ready startup(s); time to ready "
            f"p50 {s.p50_s:.0f} s, p95 {s.p95_s:.0f} s, max {s.max_s:.0f} s",
            f"# the kubelet gives up after {s.budget_s} s ({s.failure_threshold} x {s.period_s} s) "
            f"> {MARGIN} x p95 + one period",
            f"- engine: {json.dumps(s.engine)}",
            f"  model: {json.dumps(s.model)}",
            "  startupProbe:",
            "    exec:",
            f"      command: [bootwatch, probe, --state, {json.dumps(state_path)}, --ready]",
            f"    periodSeconds: {s.period_s}",
            "    timeoutSeconds: 5",
            f"    failureThreshold: {s.failure_threshold}",
        ]
    return "\n".join(lines) + "\n"


__all__ = ["Suggestion", "percentile", "render_yaml", "suggest"]
