"""What one line carries through the tracker's steps, and what a step is.

`Tracker.feed` builds one `LineContext` per line and hands it to each step of `steps.STEPS` in turn: a
step reads what the earlier ones left in it (the launch, the rules selected for its engine, whether the
line matched anything), changes the launch, appends events, and may say the line is consumed (a traceback
took it), which ends the line's run. Keeping that state here, not in locals of one long method, is what
lets each step live in a small module of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from bootwatch.engines.rules import Rule
from bootwatch.lines import Line
from bootwatch.tracker.events import Event
from bootwatch.tracker.launch import Launch

if TYPE_CHECKING:
    from bootwatch.tracker.tracker import Tracker


@dataclass(slots=True)
class LineContext:
    line: Line
    hits: list[Rule]  # every rule the line's text matched, of every engine
    launch: Launch  # the launch the line belongs to (segmentation runs as the context is built)
    events: list[Event]  # what the line gave, in order: `feed` returns it
    t: float | None = None  # the launch's clock at this line (the line's own time, else the last one seen)
    sel: dict[str, list[Rule]] = field(default_factory=dict)  # this engine's hits, by kind (the select step)
    starting: bool = True  # the launch was not ready when its rules were selected for this line
    benign: bool = False  # a rule calls the line harmless: no evidence of failure, whatever else it says
    matched: bool = False  # a fact, warning, phase, progress, readiness or evidence rule took the line
    consumed: bool = False  # a traceback took the line: the steps after that one do not see it


class Step(Protocol):
    """One job of the tracker's per-line work, e.g. `facts.facts`."""

    def __call__(self, tracker: Tracker, ctx: LineContext, /) -> None: ...
