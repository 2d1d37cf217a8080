"""Event sinks for scripts and programs: timestamped plain lines, and JSON lines.

Both sit at the boundary where a log's text leaves bootwatch: secrets are masked here
(`redact`), and plain lines escape control characters (`printable`) so a log cannot drive the
terminal. JSON needs no escaping of its own: `json.dumps` writes every control character (and
everything beyond ASCII) as a `\\u` escape.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

from rich.console import Console

from bootwatch.durations import fmt_duration
from bootwatch.serving.render import PlainThrottle, describe
from bootwatch.sinks.summary_text import render
from bootwatch.text import shown
from bootwatch.text.redact import redact_obj
from bootwatch.tracker import (
    ActivityEvent,
    EtaEvent,
    Event,
    FactEvent,
    FailedEvent,
    LaunchEvent,
    LineEvent,
    PhaseEvent,
    ProgressEvent,
    ReadyEvent,
    ServingEvent,
    StalledEvent,
    StallEvent,
    TimeoutEvent,
    WarningEvent,
)

# Event kinds that exist for live views only, not for the SPEC's event stream.
_LIVE_ONLY: tuple[type[Event], ...] = (LineEvent,)


def _clock(now: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(now))


class PlainSink:
    """One line per phase change or progress step, never one per log line: what a script or agent reads."""

    def __init__(self, out: TextIO | None = None, source: str = "") -> None:
        self.out = out or sys.stdout
        self.source = source
        self._decile: dict[str, int] = {}
        self._last_progress_t: dict[str, float] = {}
        self._serving: dict[str, PlainThrottle] = {}  # by node

    def _say(self, now: float, text: str, node: str = "") -> None:
        tag = f"[{node}] " if node else ""
        self.out.write(f"{_clock(now)}  {shown(tag + text)}\n")
        self.out.flush()

    def note(self, now: float, text: str) -> None:
        self._say(now, text)

    def event(self, ev: Event, now: float) -> None:
        # A kind not here (a log line) prints nothing: this stream is steps and verdicts, never the log itself.
        node = ev.node or ""
        match ev:
            case PhaseEvent():
                self._on_phase(ev, now, node)
            case ProgressEvent():
                self._on_progress(ev, now, node)
            case WarningEvent():
                where = f"  (line {ev.line_no})" if ev.line_no is not None else ""
                self._say(now, f"warning {ev.warning}: {ev.text}{where}", node)
            case StallEvent() | ActivityEvent():
                self._say(now, f"{ev.kind}: {ev.message}", node)
            case EtaEvent():
                self._on_eta(ev, now, node)
            case ReadyEvent():
                where = f" (line {ev.line_no})" if ev.line_no else ""
                self._say(now, f"READY{where}: {ev.text}", node)
            case FailedEvent():
                when = "after readiness" if ev.runtime else "during startup"
                # A death with no log line (an exit code, a signal) has no line to name.
                line = f", line {ev.line_no}" if ev.line_no is not None else ""
                self._say(now, f"FAILED {when} ({ev.category}{line}): {ev.text}", node)
            case TimeoutEvent() | StalledEvent():
                self._say(now, f"{ev.kind.upper()}: {ev.message}", node)
            case LaunchEvent():
                self._say(now, f"a new launch starts at line {ev.line_no}", node)
            case ServingEvent():
                if self._serving.setdefault(node, PlainThrottle()).due(now, ev):
                    self._say(now, f"serving {describe(ev)}", node)
            case FactEvent():
                if ev.name in ("health", "verify_latency_s"):  # the others are in the summary
                    self._say(now, f"{ev.name}: {ev.value}", node)

    # ---- the kinds that need more than a line ------------------------------------------------------
    def _on_phase(self, ev: PhaseEvent, now: float, node: str) -> None:
        if ev.name != "ready":  # the READY line says it
            draft = " (draft model)" if ev.draft else ""
            self._say(now, f"phase {ev.name}{draft}  (line {ev.line_no})", node)

    def _on_progress(self, ev: ProgressEvent, now: float, node: str) -> None:
        p = ev.progress
        if p is None:
            return
        # A line per tenth, or every 15 s when progress crawls: enough to see it move, never a flood.
        phase_key = f"{node}/{ev.phase}"
        decile = int(p * 10)
        last_t = self._last_progress_t.get(phase_key, 0.0)
        if decile > self._decile.get(phase_key, -1) or now - last_t >= 15:
            self._decile[phase_key] = decile
            self._last_progress_t[phase_key] = now
            count = f" {ev.n}/{ev.total}" if ev.total else ""
            self._say(now, f"progress {ev.phase}{count} {p * 100:.0f}%", node)

    def _on_eta(self, ev: EtaEvent, now: float, node: str) -> None:
        if ev.p50_s is None:
            return
        self._say(
            now,
            f"eta {ev.phase}: p50 {fmt_duration(ev.p50_s)}, p90 {fmt_duration(ev.p90_s)} "
            f"(from {ev.n} past startups, {ev.basis})",
            node,
        )

    def close(self, summary: dict[str, Any], now: float) -> None:
        self.out.write("\n")
        render(summary, self.source, Console(file=self.out, highlight=False, soft_wrap=True))
        self.out.flush()


class JsonSink:
    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout

    def _write(self, obj: dict[str, Any]) -> None:
        # ensure_ascii (the default) is what keeps a log's control characters out of the output.
        self.out.write(json.dumps(redact_obj(obj), ensure_ascii=True) + "\n")
        self.out.flush()

    def note(self, now: float, text: str) -> None:
        """What a source or bootwatch itself has to say (a reconnect, a launch that already ended)."""
        self._write({"t": round(now, 3), "event": "warning", "kind": "bootwatch", "text": text})

    def event(self, ev: Event, now: float) -> None:
        if not isinstance(ev, _LIVE_ONLY):
            self._write(ev.to_json(now))

    def close(self, summary: dict[str, Any], now: float) -> None:
        self._write({"t": round(now, 3), "event": "summary", **summary})


def summary_json(summary: dict[str, Any]) -> str:
    """The summary as one JSON line, secrets masked (for `report --json`)."""
    return json.dumps(redact_obj(summary), ensure_ascii=True)


__all__ = ["JsonSink", "PlainSink", "summary_json"]
