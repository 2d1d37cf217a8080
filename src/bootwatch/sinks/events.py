"""Event sinks for scripts and programs: timestamped plain lines, and JSON lines."""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

from rich.console import Console

from bootwatch.sinks.summary_text import fmt_duration, render
from bootwatch.tracker import Event


def _clock(now: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(now))


class PlainSink:
    """One line per phase change or progress step, never one per log line: what a script or agent reads."""

    def __init__(self, out: TextIO | None = None, source: str = "") -> None:
        self.out = out or sys.stdout
        self.source = source
        self._decile: dict[str, int] = {}
        self._last_progress_t: dict[str, float] = {}

    def _say(self, now: float, text: str) -> None:
        self.out.write(f"{_clock(now)}  {getattr(self, '_node', '')}{text}\n")
        self.out.flush()

    def note(self, now: float, text: str) -> None:
        self._node = ""
        self._say(now, text)

    def event(self, ev: Event, now: float) -> None:
        d = ev.data
        k = ev.kind
        if d.get("node"):
            self._node = f"[{d['node']}] "
        else:
            self._node = ""
        if k == "phase":
            if d["name"] != "ready":
                draft = " (draft model)" if d.get("draft") else ""
                self._say(now, f"phase {d['name']}{draft}  (line {d['line_no']})")
        elif k == "progress":
            phase = d.get("phase", "")
            p = d.get("progress")
            if p is None:
                return
            phase_key = f"{d.get('node', '')}/{phase}"
            decile = int(p * 10)
            last_t = self._last_progress_t.get(phase_key, 0.0)
            if decile > self._decile.get(phase_key, -1) or now - last_t >= 15:
                self._decile[phase_key] = decile
                self._last_progress_t[phase_key] = now
                count = f" {d['n']}/{d['total']}" if d.get("total") else ""
                self._say(now, f"progress {phase}{count} {p * 100:.0f}%")
        elif k == "warning":
            self._say(now, f"warning {d['kind']}: {d['text']}  (line {d['line_no']})")
        elif k == "stall":
            self._say(now, f"stall: {d['message']}")
        elif k == "ready":
            where = f" (line {d['line_no']})" if d.get("line_no") else ""
            self._say(now, f"READY{where}: {d.get('text', '')}")
        elif k == "failed":
            when = "after readiness" if d.get("runtime") else "during startup"
            self._say(now, f"FAILED {when} ({d.get('category', 'unknown')}, line {d.get('line_no')}): {d['text']}")
        elif k in ("timeout", "stalled"):
            self._say(now, f"{k.upper()}: {d.get('message', '')}")
        elif k == "launch":
            self._say(now, f"a new launch starts at line {d['line_no']}")
        elif k == "fact" and d.get("name") in ("health", "verify_latency_s"):
            self._say(now, f"{d['name']}: {d['value']}")

    def close(self, summary: dict[str, Any], now: float) -> None:
        self.out.write("\n")
        render(summary, self.source, Console(file=self.out, highlight=False, soft_wrap=True))
        self.out.flush()





class JsonSink:
    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout

    def note(self, now: float, text: str) -> None:
        """What a source or bootwatch itself has to say (a reconnect, a launch that already ended)."""
        self.out.write(json.dumps({"t": round(now, 3), "event": "warning", "kind": "bootwatch", "text": text}) + "\n")
        self.out.flush()

    def event(self, ev: Event, now: float) -> None:
        self.out.write(json.dumps(ev.to_json(now)) + "\n")
        self.out.flush()

    def close(self, summary: dict[str, Any], now: float) -> None:
        self.out.write(json.dumps({"t": round(now, 3), "event": "summary", **summary}) + "\n")
        self.out.flush()


__all__ = ["PlainSink", "JsonSink", "fmt_duration"]
