"""What every sink is: the live session and the commands hand it events, notes and the final summary."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from bootwatch.tracker import Event


class Sink(Protocol):
    def event(self, ev: Event, now: float) -> None: ...

    def note(self, now: float, text: str) -> None: ...

    def close(self, summary: dict[str, Any], now: float) -> None: ...


@runtime_checkable
class ServerAware(Protocol):
    """A sink that names the server's pid once `run` started it (the probe's state file)."""

    def set_server(self, pid: int) -> None: ...


@runtime_checkable
class HandsOver(Protocol):
    """A sink that owns the terminal (the live view): it ends its drawing before another program takes it."""

    def handover(self, summary: dict[str, Any], now: float, what: str) -> None: ...


class NullSink:
    """Keeps what it is told (for tests and for callers that only want the summary)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.notes: list[str] = []
        self.summary: dict[str, Any] | None = None

    def event(self, ev: Event, now: float) -> None:
        self.events.append(ev)

    def note(self, now: float, text: str) -> None:
        self.notes.append(text)

    def close(self, summary: dict[str, Any], now: float) -> None:
        self.summary = summary
