"""Several sinks as one: the user's (live view, plain lines, JSON) and the extra ones (metrics, state file)."""

from __future__ import annotations

from typing import Any

from bootwatch.sinks.protocol import HandsOver, ServerAware, Sink
from bootwatch.tracker import Event


class FanOut:
    """Each event, note and the summary go to every sink; the main one closes last (its summary is the last
    line a script reads)."""

    def __init__(self, main: Sink, *extra: Sink) -> None:
        self.main = main
        self.extra = list(extra)

    def event(self, ev: Event, now: float) -> None:
        self.main.event(ev, now)
        for s in self.extra:
            s.event(ev, now)

    def note(self, now: float, text: str) -> None:
        self.main.note(now, text)
        for s in self.extra:
            s.note(now, text)

    def close(self, summary: dict[str, Any], now: float) -> None:
        for s in self.extra:
            s.close(summary, now)
        self.main.close(summary, now)

    def handover(self, summary: dict[str, Any], now: float, what: str) -> None:
        if isinstance(self.main, HandsOver):
            self.main.handover(summary, now, what)

    def set_server(self, pid: int) -> None:
        for s in (self.main, *self.extra):
            if isinstance(s, ServerAware):
                s.set_server(pid)
