"""What the tracker asks of the follower that reads a ready server's stats lines (serving/ implements it).

The tracker hands those lines on and takes the events back; it does not import serving/, which sits above it
(serving speaks the tracker's events), so the follower is given to it by whoever builds the tracker."""

from __future__ import annotations

from typing import Any, Protocol

from bootwatch.engines.rules import Rule
from bootwatch.lines import Line
from bootwatch.tracker.events import Event


class ServingFollower(Protocol):
    def feed_line(self, launch: Any, line: Line, hits: list[Rule]) -> list[Event]:
        """A stats line of a ready launch, with the stats rules it matched: the events it gives."""
        ...

    def summary(self) -> dict[str, Any] | None:
        """The summary's `serving` part, None when nothing was served."""
        ...

    def latest(self) -> Event | None:
        """The latest reading as a `serving` event (None before any): what a watch that attaches says first."""
        ...
