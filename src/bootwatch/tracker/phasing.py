"""Where a starting launch stands: its phases, progress within a phase, and readiness.

Phases only move forward in the canonical order (`phases.RANK`), except drafts (a speculative model's
loading) and repeats, which a rule marks. An end line with no begin line still counts (older versions print
only the end). Progress after a traceback from the same process means the process survived it, so phases and
progress cancel its traceback candidates; readiness cancels them all. None of this runs once the launch is
ready: then its lines are serving's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bootwatch.engines.pattern import Found
from bootwatch.engines.rules import Rule
from bootwatch.lines import Line
from bootwatch.tracker.context import LineContext
from bootwatch.tracker.events import Event, PhaseEvent, ProgressEvent
from bootwatch.tracker.evidence import cancel_candidates, mark_dying
from bootwatch.tracker.launch import Launch
from bootwatch.tracker.parts import Ready
from bootwatch.tracker.phases import RANK, Phase

if TYPE_CHECKING:
    from bootwatch.tracker.tracker import Tracker

ALIAS = {"load_draft": "load_weights"}
# A progress rule named so counts whatever phase is under way (a bar with no label of its own).
CURRENT = "current"


# ---- steps -----------------------------------------------------------------------------------------
def phases(tracker: Tracker, ctx: LineContext) -> None:
    """The first phase rule of the engine's file that the line matched (from the set's hits) begins or
    ends a phase."""
    rules = ctx.sel.get("phase") if ctx.starting else None
    if not rules:
        return
    r = rules[0]
    if r.done:
        _end(ctx.launch, r, ctx.line, ctx.t, ctx.events)
    else:
        _start(ctx.launch, r, ctx.line, ctx.t, ctx.events)
    ctx.matched = True
    _stepped(ctx)


def progress(tracker: Tracker, ctx: LineContext) -> None:
    """n of total within the current phase (a later phase's progress begins that phase)."""
    if not ctx.starting:
        return
    for r in ctx.sel.get("progress", ()):
        m = r.regex.search(ctx.line.text)
        if m:
            _advance(ctx.launch, r, m, ctx.line, ctx.t, ctx.events)
            ctx.matched = True
            _stepped(ctx)
            return


def readiness(tracker: Tracker, ctx: LineContext) -> None:
    """A ready rule whose flags allow it: the launch is ready, unless it already started dying."""
    if not ctx.starting:
        _later_load(ctx)
        return
    launch = ctx.launch
    for r in ctx.sel.get("ready", ()):
        if not r.allowed(launch.flags):
            continue
        # From the set's hits: it matched this message already.
        ctx.matched = True
        if launch.dying is not None:  # a ready line after the server started dying is not readiness
            return
        if r.clean and _raised_before(tracker, launch, ctx):
            return
        if r.tentative:
            if launch.tentative is None:
                launch.tentative = (ctx.line, ctx.t, launch.last_log_t, r.message)
            return
        if r.proof and launch.tentative is not None:
            confirm_tentative(launch, ctx.events)
        elif r.back and launch.last_step is not None:
            # This line proves readiness came before it (an offline engine's first request): the last step of
            # its startup was readiness.
            line, t, log_t = launch.last_step
            mark_ready(launch, line, t, ctx.events, r.message, log_t)
        else:
            mark_ready(launch, ctx.line, ctx.t, ctx.events, r.message)
        return


def _raised_before(tracker: Tracker, launch: Launch, ctx: LineContext) -> bool:
    """A `clean` ready line after an exception the launch did not survive: the server came up without what it
    loads first, so it is dying of that exception, not ready."""
    raised = [
        c
        for c in launch.candidates
        if c.kind in ("traceback", "loose") and not c.cancelled and not c.wrapper and not c.termination
    ]
    if not raised:
        return False
    first = min(raised, key=lambda c: c.line_no)
    mark_dying(tracker, launch, Line(first.line_no, first.text, first.text), ctx.t)
    return True


def _later_load(ctx: LineContext) -> None:
    """After ready, a ready line that ends a model load begun since (Ollama loads each model on demand, in a runner
    of its own): the latest load the server made ready. A load that says it started twice is one load: only a line
    a `load` flag rule takes (the load's own start) makes the next ready line count."""
    launch = ctx.launch
    if not launch.load_pending or launch.ready is None:
        return
    if any(r.allowed(launch.flags) for r in ctx.sel.get("ready", ())):
        launch.load_pending = False
        launch.loads += 1
        launch.last_load = Ready(ctx.line.no, ctx.line.text.strip())


# ---- what they do ----------------------------------------------------------------------------------
def _stepped(ctx: LineContext) -> None:
    ctx.launch.last_step = (ctx.line, ctx.t, ctx.launch.last_log_t)


def _begin(launch: Launch, name: str, draft: bool, line: Line, t: float | None, ev: list[Event]) -> None:
    launch.close_phase(line.no, t)
    launch.open_phase(Phase(name, line.no, t, draft=draft))
    cancel_candidates(launch, line.proc)
    ev.append(PhaseEvent(t=t, name=name, line_no=line.no, draft=draft, text=line.text))


def _later(name: str, cur: Phase) -> bool:
    return RANK.get(name, 0) > RANK.get(cur.name, 0)


def _end(launch: Launch, r: Rule, line: Line, t: float | None, ev: list[Event]) -> None:
    name = r.name or ""
    cur = launch.current
    same = cur is not None and ALIAS.get(cur.name, cur.name) == ALIAS.get(name, name)
    if not same and (cur is None or _later(name, cur)):
        # An end line with no begin line (older versions print only the end): it did happen.
        _begin(launch, name, r.draft, line, t, ev)
        cur, same = launch.current, True
    if same and cur is not None:
        cur.done = True
        ev.append(ProgressEvent(t=t, phase=cur.name, progress=1.0, line_no=line.no))
    cancel_candidates(launch, line.proc)


def _start(launch: Launch, r: Rule, line: Line, t: float | None, ev: list[Event]) -> None:
    name = r.name or ""
    cur = launch.current
    key = (line.proc, r.source)
    seen = launch.begun.get(key, 0)
    launch.begun[key] = seen + 1
    draft = r.draft
    if seen and r.repeat:
        name, draft = r.repeat, True
    if cur is not None and cur.name == name and cur.draft == draft:
        return
    if cur is None or draft or _later(name, cur):
        _begin(launch, name, draft, line, t, ev)


def _advance(launch: Launch, r: Rule, m: Found, line: Line, t: float | None, ev: list[Event]) -> None:
    name = r.name or ""
    cur = launch.current
    if cur is None:
        return
    if name == CURRENT:  # a bar with no label: it counts the phase under way
        name = ALIAS.get(cur.name, cur.name)
    if ALIAS.get(cur.name, cur.name) != name and _later(name, cur):
        _begin(launch, name, False, line, t, ev)
        cur = launch.current
    elif ALIAS.get(cur.name, cur.name) != name:
        return
    g = m.groupdict()
    n_text, total_text = g.get("n"), g.get("total")
    if n_text is None or total_text is None:
        return
    try:
        n, total = int(n_text), int(total_text)
    except ValueError:
        return
    if cur is None:
        return
    if (n, total) != (cur.n, cur.total):
        cur.n, cur.total = n, total
        ev.append(ProgressEvent(t=t, phase=cur.name, n=n, total=total, progress=cur.progress, line_no=line.no))
    cancel_candidates(launch, line.proc)


def confirm_tentative(launch: Launch, ev: list[Event]) -> None:
    """The launch was ready at its tentative ready line: serving numbers followed it, the log went quiet with the
    server up, or a recorded log ended there, with no HTTP framework's ready line and no failure after it."""
    assert launch.tentative is not None
    line, t, log_t, how = launch.tentative
    mark_ready(launch, line, t, ev, how, log_t)


def mark_ready(
    launch: Launch, line: Line, t: float | None, ev: list[Event], how: str | None = None, log_t: float | None = None
) -> None:
    """`log_t`: the log's clock at `line` when it is an earlier line than the latest (a `back` rule's)."""
    log_t = launch.last_log_t if log_t is None else log_t
    # a server that loads models on demand, up while a load is still under way (LM Studio loads one just in time as
    # its API binds): that load's ready line is to come, and it is the one the user waits for
    cur = launch.current
    loading = (
        cur is not None
        and cur.name == "load_weights"
        and cur.end_line is None
        and any(r.load for r in launch.rules["flag"])
    )
    launch.close_phase(line.no, t, log_t)
    launch.open_phase(Phase("ready", line.no, t, line.no, t, done=True, end_log_t=log_t), log_t)
    # The log says ready; the `ready` phase and event are the verdict machine's to emit once it accepts it
    # (a generic uvicorn line may be revoked by a later warm-up failure, a --url must answer first).
    # `how`: what the readiness rests on, when the rule says (an unknown engine's own listening line)
    launch.ready = Ready(line.no, line.text.strip(), how)
    launch.ready_engine = launch.engine
    if launch.first_only_seen:  # a model load's launch (Ollama): its first load
        launch.load_pending = False
        launch.loads, launch.last_load = 1, launch.ready
    elif loading:
        launch.load_pending = True
    cancel_candidates(launch, None, everything=True)
