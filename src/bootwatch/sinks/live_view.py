"""The terminal view: phases done with durations, the current phase with a bar and ETA, the last line."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from bootwatch.sinks.summary_text import fmt_duration, render
from bootwatch.tracker import Event, Tracker


class LiveSink:
    def __init__(self, trackers: list[tuple[str, Tracker]], source: str, console: Console | None = None) -> None:
        self.trackers = trackers
        self.tracker = trackers[0][1]
        self.source = source
        self.console = console or Console()
        self.started = time.time()
        self.notes: list[str] = []
        self.health = ""
        self._rate: dict[str, tuple[float, int]] = {}  # phase -> (time first seen, n then)
        self.live = Live(self._render(), console=self.console, refresh_per_second=4, transient=True)
        self.live.start()

    def note(self, now: float, text: str) -> None:
        self.notes = (self.notes + [text])[-3:]

    def event(self, ev: Event, now: float) -> None:
        if ev.kind == "progress" and ev.data.get("n") is not None:
            self._rate.setdefault(ev.data["phase"], (now, ev.data["n"]))
        elif ev.kind == "fact" and ev.data.get("name") == "health":
            self.health = str(ev.data["value"])
        elif ev.kind == "stall":
            self.note(now, ev.data["message"])
        self.live.update(self._render())

    def _eta(self, name: str, n: int | None, total: int | None) -> str:
        if n is None or not total or name not in self._rate:
            return ""
        t0, n0 = self._rate[name]
        elapsed = time.time() - t0
        if n <= n0 or elapsed <= 0:
            return ""
        rate = (n - n0) / elapsed
        return f"ETA {fmt_duration((total - n) / rate)}"

    def _rows(self, now: float) -> Any:
        """Several nodes or servers: one row each."""
        t = Table(box=None, header_style="bold", pad_edge=False)
        for col in ("node", "phase", "progress", "last line"):
            t.add_column(col)
        for name, tracker in self.trackers:
            launch = tracker.launch
            if launch is None:
                t.add_row(name, "waiting", "", "")
                continue
            cur = launch.current
            verdict = tracker.verdict()
            phase = verdict.upper() if verdict in ("ready", "failed") else (cur.name if cur else "start")
            prog = f"{cur.n}/{cur.total}" if cur is not None and cur.total else ""
            style = {"READY": "green", "FAILED": "red"}.get(phase, "cyan")
            t.add_row(name, Text(phase, style=style), prog, Text((launch.last_line or "")[:90], style="dim"))
        return t

    def _render(self) -> Any:
        now = time.time()
        if len(self.trackers) > 1:
            head = Text(f"bootwatch  {self.source}   elapsed {fmt_duration(now - self.started)}", style="bold")
            return Group(head, self._rows(now), *[Text(n[:200], style="yellow") for n in self.notes])
        launch = self.tracker.launch
        head = Text(f"bootwatch  {self.source}   elapsed {fmt_duration(now - self.started)}", style="bold")
        if self.health:
            head.append(f"   health: {self.health}", style="cyan")
        parts: list[Any] = [head]
        if launch is None:
            parts.append(Text("waiting for the server's first line...", style="dim"))
            return Group(*parts)
        t = Table(box=None, show_header=False, pad_edge=False)
        t.add_column(width=22)
        t.add_column(justify="right", width=9)
        t.add_column(width=44)
        phases = launch.phases
        for i, p in enumerate(phases):
            name = p.name + (" (draft)" if p.draft else "")
            current = i == len(phases) - 1 and p.end_line is None and p.name != "ready"
            if current:
                dur = fmt_duration(now - self.started if p.start_t is None or launch.last_t is None
                                   else max(0.0, (launch.last_t or 0) - p.start_t))
                prog = p.progress
                bar: Any = ProgressBar(total=1.0, completed=prog or 0.0, width=24) if prog is not None else Text("")
                count = f" {p.n}/{p.total}" if p.total else ""
                row = Table.grid()
                row.add_row(bar, Text(f"{count} {self._eta(p.name, p.n, p.total)}"))
                t.add_row(Text("> " + name, style="bold cyan"), dur, row)
            else:
                t.add_row(Text("  " + name, style="green" if p.name == "ready" else ""), fmt_duration(p.duration),
                          Text("done" if p.done or p.end_line else ""))
        parts.append(t)
        for w in launch.warnings[-3:]:
            parts.append(Text(f"warning {w['kind']}: {w['text'][:150]}", style="yellow"))
        for n in self.notes:
            parts.append(Text(n[:200], style="yellow"))
        if launch.last_line:
            parts.append(Text("last: " + launch.last_line[:160], style="dim"))
        return Group(*parts)

    def tick(self) -> None:
        self.live.update(self._render())

    def close(self, summary: dict[str, Any], now: float) -> None:
        self.live.stop()
        render(summary, self.source, self.console)
