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

    def _say(self, now: float, text: str, node: str = "") -> None:
        tag = f"[{node}] " if node else ""
        self.out.write(f"{_clock(now)}  {shown(tag + text)}\n")
        self.out.flush()

    def note(self, now: float, text: str) -> None:
        self._say(now, text)

    def event(self, ev: Event, now: float) -> None:
        k = kind_of(ev)
        def get(name: str, default: Any = None) -> Any:
            return field_of(ev, name, default)

        node = str(get("node") or "")
        if k == "phase":
            if get("name") != "ready":
                draft = " (draft model)" if get("draft") else ""
                self._say(now, f"phase {get('name')}{draft}  (line {get('line_no')})", node)
        elif k == "progress":
            phase = get("phase", "")
            p = get("progress")
            if p is None:
                return
            phase_key = f"{node}/{phase}"
            decile = int(p * 10)
            last_t = self._last_progress_t.get(phase_key, 0.0)
            if decile > self._decile.get(phase_key, -1) or now - last_t >= 15:
                self._decile[phase_key] = decile
                self._last_progress_t[phase_key] = now
                count = f" {get('n')}/{get('total')}" if get("total") else ""
                self._say(now, f"progress {phase}{count} {p * 100:.0f}%", node)
        elif k == "warning":
            where = f"  (line {get('line_no')})" if get("line_no") is not None else ""
            self._say(now, f"warning {get('kind')}: {get('text')}{where}", node)
        elif k in ("stall", "activity"):
            self._say(now, f"{k}: {get('message')}", node)
        elif k == "eta" and get("p50_s") is not None:
            self._say(now, f"eta {get('phase')}: p50 {fmt_duration(get('p50_s'))}, p90 {fmt_duration(get('p90_s'))} "
                      f"(from {get('n')} past startups, {get('basis')})", node)
        elif k == "ready":
            where = f" (line {get('line_no')})" if get("line_no") else ""
            self._say(now, f"READY{where}: {get('text', '')}", node)
        elif k == "failed":
            when = "after readiness" if get("runtime") else "during startup"
            self._say(now, f"FAILED {when} ({get('category', 'unknown')}, line {get('line_no')}): {get('text')}",
                      node)
        elif k in ("timeout", "stalled"):
            self._say(now, f"{k.upper()}: {get('message', '')}", node)
        elif k == "launch":
            self._say(now, f"a new launch starts at line {get('line_no')}", node)
        elif k == "serving" and self._serving.setdefault(node, PlainThrottle()).due(now, ev.data):
            self._say(now, f"serving {describe(ev.data)}", node)
        elif k == "fact" and get("name") in ("health", "verify_latency_s"):
            self._say(now, f"{get('name')}: {get('value')}", node)

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
