"""The tracker's per-line work, as an ordered list of small steps (structlog's processors, for lines).

`Tracker.feed` finds the launch the line belongs to (`segmentation.py`), builds its `LineContext` and runs
`STEPS` in this order until one says the line is consumed. The order is the behaviour: the clock comes
first, so that every step sees the line's time; the engine is weighed before its rules are selected, since
this very line may change it; tracebacks take their lines before any rule looks at them; phases, progress
and readiness only while the launch is starting, serving stats only once it was ready before the line;
evidence after readiness, which changes what counts; and the line is remembered last. The steps that are
one job of their own live in modules named for it; the glue steps are here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bootwatch.tracker import detection, evidence, facts, phasing
from bootwatch.tracker.context import LineContext, Step

if TYPE_CHECKING:
    from bootwatch.tracker.tracker import Tracker


def clock(tracker: Tracker, ctx: LineContext) -> None:
    """The launch's clock: the line's own time, else the last one seen; and where the launch got to."""
    launch, line = ctx.launch, ctx.line
    if line.t is not None:
        launch.last_t = line.t
    if (log_t := line.log_t) is not None:
        launch.last_log_t = log_t
        cur = launch.current
        if cur is not None and cur.start_log_t is None and cur.end_line is None:
            cur.start_log_t = log_t  # begun on a line with no time of its own (a banner): its first stamped line
    ctx.t = launch.last_t
    launch.last_no = line.no


def serving(tracker: Tracker, ctx: LineContext) -> None:
    """After ready: throughput, queue and findings from the engine's stats lines."""
    if not ctx.starting and "stats" in ctx.sel:
        ctx.events.extend(tracker.serving.feed_line(ctx.launch, ctx.line, ctx.sel["stats"]))


def remember(tracker: Tracker, ctx: LineContext) -> None:
    """The last meaningful line (for live views) and the few latest lines (a failure's context)."""
    line = ctx.line
    if ctx.matched or line.level in ("WARNING", "ERROR"):
        ctx.launch.last_line = line.raw
    ctx.launch.recent.append(line.raw)
    if line.text.strip():
        ctx.launch.prev = (line, ctx.hits, ctx.t, ctx.launch.last_log_t)


# The steps that act only on what the line's rule hits select, by kind: a line no rule matched (most lines of a
# traceback, exception-shaped and error-level lines; over a third of the lines the tracker sees) skips them.
_BY_KIND: tuple[Step, ...] = (
    facts.flags,
    facts.facts,
    facts.warnings,
    phasing.phases,
    phasing.progress,
    phasing.readiness,
    serving,
)
STEPS: tuple[Step, ...] = (
    clock,
    detection.detect,  # engine by weight of evidence (may change the launch's engine and rules)
    evidence.tracebacks,  # a traceback may consume the line: the steps below do not see it
    detection.select,  # the line's hits that are this engine's rules, by kind
    *_BY_KIND,
    evidence.evidence,
    detection.keep_for_rejudging,  # keeps lines whose hits some engine calls evidence
    remember,
)
STEPS_WITHOUT_HITS: tuple[Step, ...] = tuple(s for s in STEPS if s not in (*_BY_KIND, detection.keep_for_rejudging))
