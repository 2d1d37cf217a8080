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
from collections.abc import Callable
from typing import Any, TextIO

from rich.console import Console

from bootwatch.durations import fmt_duration
from bootwatch.serving.render import PlainThrottle, describe
from bootwatch.sinks.summary_text import render
from bootwatch.text import shown
from bootwatch.text.redact import redact_obj
from bootwatch.tracker import Event

# Event kinds that exist for live views only, not for the SPEC's event stream.
_LIVE_ONLY = ("line",)


# ---- how sinks read an event (one place to change if events become typed) ------------------------
def kind_of(ev: Event) -> str:
    return ev.kind


def field_of(ev: Event, name: str, default: Any = None) -> Any:
    return ev.data.get(name, default)


def time_of(ev: Event) -> float | None:
    """The event's own time: the log's clock when it has one, else when it arrived."""
    return ev.t


def event_json(ev: Event, now: float) -> dict[str, Any]:
    return ev.to_json(now)


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
        # A kind not here (a log line) prints nothing: this stream is steps and verdicts, never the log itself.
        self._handlers: dict[str, Callable[[Event, float, str], None]] = {
            "phase": self._on_phase,
            "progress": self._on_progress,
            "warning": self._on_warning,
            "stall": self._on_message,
            "activity": self._on_message,
            "eta": self._on_eta,
            "ready": self._on_ready,
            "failed": self._on_failed,
            "timeout": self._on_end,
            "stalled": self._on_end,
            "launch": self._on_launch,
            "serving": self._on_serving,
            "fact": self._on_fact,
        }

    def _say(self, now: float, text: str, node: str = "") -> None:
        tag = f"[{node}] " if node else ""
        self.out.write(f"{_clock(now)}  {shown(tag + text)}\n")
        self.out.flush()

    def note(self, now: float, text: str) -> None:
        self._say(now, text)

    def event(self, ev: Event, now: float) -> None:
        handler = self._handlers.get(kind_of(ev))
        if handler is not None:
            handler(ev, now, str(field_of(ev, "node") or ""))

    # ---- one handler per event kind: (event, now, node) ---------------------------------------------
    def _on_phase(self, ev: Event, now: float, node: str) -> None:
        if field_of(ev, "name") != "ready":  # the READY line says it
            draft = " (draft model)" if field_of(ev, "draft") else ""
            self._say(now, f"phase {field_of(ev, 'name')}{draft}  (line {field_of(ev, 'line_no')})", node)

    def _on_progress(self, ev: Event, now: float, node: str) -> None:
        phase = field_of(ev, "phase", "")
        p = field_of(ev, "progress")
        if p is None:
            return
        # A line per tenth, or every 15 s when progress crawls: enough to see it move, never a flood.
        phase_key = f"{node}/{phase}"
        decile = int(p * 10)
        last_t = self._last_progress_t.get(phase_key, 0.0)
        if decile > self._decile.get(phase_key, -1) or now - last_t >= 15:
            self._decile[phase_key] = decile
            self._last_progress_t[phase_key] = now
            count = f" {field_of(ev, 'n')}/{field_of(ev, 'total')}" if field_of(ev, "total") else ""
            self._say(now, f"progress {phase}{count} {p * 100:.0f}%", node)

    def _on_warning(self, ev: Event, now: float, node: str) -> None:
        where = f"  (line {field_of(ev, 'line_no')})" if field_of(ev, "line_no") is not None else ""
        self._say(now, f"warning {field_of(ev, 'kind')}: {field_of(ev, 'text')}{where}", node)

    def _on_message(self, ev: Event, now: float, node: str) -> None:
        self._say(now, f"{kind_of(ev)}: {field_of(ev, 'message')}", node)

    def _on_eta(self, ev: Event, now: float, node: str) -> None:
        if field_of(ev, "p50_s") is None:
            return
        self._say(
            now,
            f"eta {field_of(ev, 'phase')}: p50 {fmt_duration(field_of(ev, 'p50_s'))}, "
            f"p90 {fmt_duration(field_of(ev, 'p90_s'))} "
            f"(from {field_of(ev, 'n')} past startups, {field_of(ev, 'basis')})",
            node,
        )

    def _on_ready(self, ev: Event, now: float, node: str) -> None:
        where = f" (line {field_of(ev, 'line_no')})" if field_of(ev, "line_no") else ""
        self._say(now, f"READY{where}: {field_of(ev, 'text', '')}", node)

    def _on_failed(self, ev: Event, now: float, node: str) -> None:
        when = "after readiness" if field_of(ev, "runtime") else "during startup"
        self._say(
            now,
            f"FAILED {when} ({field_of(ev, 'category', 'unknown')}, line {field_of(ev, 'line_no')}): "
            f"{field_of(ev, 'text')}",
            node,
        )

    def _on_end(self, ev: Event, now: float, node: str) -> None:
        self._say(now, f"{kind_of(ev).upper()}: {field_of(ev, 'message', '')}", node)

    def _on_launch(self, ev: Event, now: float, node: str) -> None:
        self._say(now, f"a new launch starts at line {field_of(ev, 'line_no')}", node)

    def _on_serving(self, ev: Event, now: float, node: str) -> None:
        if self._serving.setdefault(node, PlainThrottle()).due(now, ev.data):
            self._say(now, f"serving {describe(ev.data)}", node)

    def _on_fact(self, ev: Event, now: float, node: str) -> None:
        if field_of(ev, "name") in ("health", "verify_latency_s"):  # the others are in the summary
            self._say(now, f"{field_of(ev, 'name')}: {field_of(ev, 'value')}", node)

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
        if kind_of(ev) not in _LIVE_ONLY:
            self._write(event_json(ev, now))

    def close(self, summary: dict[str, Any], now: float) -> None:
        self._write({"t": round(now, 3), "event": "summary", **summary})


def summary_json(summary: dict[str, Any]) -> str:
    """The summary as one JSON line, secrets masked (for `report --json`)."""
    return json.dumps(redact_obj(summary), ensure_ascii=True)


__all__ = ["JsonSink", "PlainSink", "event_json", "field_of", "kind_of", "summary_json", "time_of"]
