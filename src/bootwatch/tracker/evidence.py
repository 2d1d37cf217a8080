"""Evidence of failure, as the lines give it: tracebacks, fatal rules' lines, exception lines, errors.

Each piece becomes a `Candidate` on the launch; nothing here decides. The root cause is chosen from the
candidates only when the launch ends or settles (`settling.py`, `candidates.choose`), because a later line
often explains an earlier one. What is decided here is what the pieces mean: a death line marks the launch
dying, progress after a traceback cancels it (the process survived), and a wrapper only reports another
process's death.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bootwatch.engines.rules import Rule
from bootwatch.lines import Line
from bootwatch.tracker.candidates import Candidate, from_traceback
from bootwatch.tracker.context import LineContext
from bootwatch.tracker.launch import Launch
from bootwatch.tracker.tracebacks import EXC_LINE, is_header

if TYPE_CHECKING:
    from bootwatch.tracker.tracker import Tracker

ERROR_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL"})
# Candidates kept once the server is ready. A server that logs a traceback per bad request makes one each:
# kept all, they grew memory by ~6 MB per MB of log (and every look over them slowed). What explains a later
# death is among the latest; the oldest ordinary ones go first, deaths and fatal lines stay.
RUNTIME_KEEP = 64


# ---- steps -----------------------------------------------------------------------------------------
def tracebacks(tracker: Tracker, ctx: LineContext) -> None:
    """Python tracebacks, assembled per process: a traceback's first exception line is a candidate, and the
    lines a traceback takes (frames, its exception, its chain) are consumed: no other step sees them. So is the
    message line below a cause_next line (a Rust panic's) or a detail_next line (NCCL's last error), which is a
    candidate whatever its shape."""
    line = ctx.line
    pending, ctx.launch.cause_next = ctx.launch.cause_next, None
    if pending is not None and line.no == pending[1] + 1 and line.text.strip():
        # the message a cause_next line announced (Rust >= 1.73 prints a panic's message below its location):
        # whatever it says (even `File "x" not found`, a frame's shape), it is the cause
        c = candidate(ctx.launch, line, pending[2], pending[0])
        if c.kind == "detail":
            ctx.launch.candidates.append(c)
        else:
            add_candidate(tracker, ctx.launch, c)
        ctx.consumed = True
        return
    tb = tracker.tb
    launch = ctx.launch
    if is_header(line.text):
        tb.start(line)
        if launch.benign_at is not None and launch.benign_at == line.no - 1:
            launch.warned_tracebacks.add(line.no)
    elif tb.busy:
        consumed, done = tb.feed(line)
        if done is not None and done.header_no not in launch.warned_tracebacks:
            add_candidate(tracker, launch, from_traceback(done))
        ctx.consumed = consumed


def evidence(tracker: Tracker, ctx: LineContext) -> None:
    """A line no rule calls benign may be evidence of failure. A benign rule may say its line is logged with its
    exception (`traceback`): the traceback right below it is the warning's, harmless too."""
    if ctx.benign:
        if any(r.traceback for r in ctx.sel.get("benign", ())):
            ctx.launch.benign_at = ctx.line.no
    else:
        ctx.matched |= judge(tracker, ctx.launch, ctx.sel, ctx.line, ctx.t)


# ---- what a line is --------------------------------------------------------------------------------
def judge(tracker: Tracker, launch: Launch, sel: dict[str, list[Rule]], line: Line, t: float | None) -> bool:
    """Failure evidence on this line: a fatal rule's, else (before readiness) a suspect or detail rule's,
    else what the line is by its shape or level (an exception line, a FATAL or ERROR record)."""
    for r in sel.get("fatal", ()):
        if not r.levels or (line.level or "-") in r.levels:  # "-": a line whose prefix names no level
            _fatal(tracker, launch, r, line, t)
            return True
    if launch.ready is not None:
        return False
    for kind in ("suspect", "detail"):
        for r in sel.get(kind, ()):  # from the set's hits: matched already
            launch.candidates.append(candidate(launch, line, kind, r.category))
            return True
    return _by_shape(tracker, launch, line, t)


def candidate(launch: Launch, line: Line, kind: str, category: str | None = None, wrapper: bool = False) -> Candidate:
    c = Candidate(
        line.no,
        line.text.strip(),
        line.proc,
        kind,
        line.no,
        category,
        list(launch.recent) + [line.raw],
        wrapper=wrapper,
    )
    c.level = line.level
    return c


def _fatal(tracker: Tracker, launch: Launch, r: Rule, line: Line, t: float | None) -> None:
    if r.role in ("cause", "cause_before"):
        # cause_before: the line says the server gives up; an earlier line says why. If none does, this
        # line is still the best there is (a death candidate, chosen last).
        kind = "fatal" if r.role == "cause" else "death"
        add_candidate(tracker, launch, candidate(launch, line, kind, r.category))
    elif r.role == "cause_next":
        # the failure is reported here, its message is the next line: this line is the cause only if none comes
        add_candidate(tracker, launch, candidate(launch, line, "death", r.category, wrapper=True))
        launch.cause_next = (r.category, line.no, "fatal")
    elif r.role == "detail_next":
        # the next line says precisely what the exception above meant: a detail of it, not a failure of its own
        launch.cause_next = (r.category, line.no, "detail")
        return
    elif r.role in ("death", "signal"):
        c = candidate(launch, line, "death", r.category, wrapper=True)
        # signal: the process died of it (a signal report, faulthandler, a shell's job line): what its echoes in
        # other processes (a closed pipe, a dead actor) mean
        c.signal = r.role == "signal"
        add_candidate(tracker, launch, c)
    elif r.role == "wrapper":
        # an echo of another process's death: the cause only when nothing else says anything
        add_candidate(tracker, launch, candidate(launch, line, "fatal", r.category, wrapper=True))
    mark_dying(tracker, launch, line, t)


def _by_shape(tracker: Tracker, launch: Launch, line: Line, t: float | None) -> bool:
    text = line.text.strip()
    if EXC_LINE.match(text) and ":" in text and not text[:1].isspace() and _looks_exception(text):
        add_candidate(tracker, launch, candidate(launch, line, "loose"))
        return True
    if line.level == "FATAL" and text:
        # Logged at FATAL level (TurboMind's [TM][FATAL], glog's F-lines): the program aborts after it.
        add_candidate(tracker, launch, candidate(launch, line, "fatal"))
        mark_dying(tracker, launch, line, t)
        return True
    if line.level in ERROR_LEVELS and text and not any(r.regex.search(text) for r in launch.rules["benign"]):
        # An error the server logged that no rule knows: not evidence of death by itself, but the best
        # explanation of one that follows closely.
        launch.error_lines.append(candidate(launch, line, "errlevel"))
    return False


def _looks_exception(text: str) -> bool:
    head = text.split(":", 1)[0]
    return head.endswith(("Error", "Exception", "Interrupt", "Exit", "Fault")) or head in (
        "KeyboardInterrupt",
        "SystemExit",
    )


# ---- what it does to the launch --------------------------------------------------------------------
def add_candidate(tracker: Tracker, launch: Launch, c: Candidate) -> None:
    rules = launch.rules
    if c.kind in ("traceback", "loose"):
        if any(r.regex.search(c.text) for r in rules["benign"]):
            return
        for r in rules["fatal"]:
            if r.role in ("wrapper", "death") and r.regex.search(c.text):
                # An exception that only reports another process's failure: death, not its cause.
                c.wrapper = True
                mark_dying(tracker, launch, Line(c.line_no, c.text, c.text), launch.last_t)
                break
    c.runtime = launch.ready is not None
    if c.category is None:
        c.category = category(launch, c.text)
    launch.candidates.append(c)
    if c.runtime:
        _bound_runtime(launch)


def _bound_runtime(launch: Launch) -> None:
    runtime = [i for i, x in enumerate(launch.candidates) if x.runtime]
    if len(runtime) <= RUNTIME_KEEP:
        return
    for i in runtime:
        x = launch.candidates[i]
        if x.kind not in ("fatal", "death") and not x.wrapper:
            del launch.candidates[i]
            return
    del launch.candidates[runtime[0]]


def category(launch: Launch, text: str) -> str | None:
    for r in launch.rules["category"]:
        if r.regex.search(text):
            return r.name
    return None


def cancel_candidates(launch: Launch, proc: str | None, everything: bool = False) -> None:
    """Progress after a traceback from the same process means the process survived it."""
    if launch.dying is not None:
        return
    for c in launch.candidates:
        if not c.runtime and c.kind in ("traceback", "loose") and (everything or c.proc == proc):
            c.cancelled = True


def mark_dying(tracker: Tracker, launch: Launch, line: Line, t: float | None) -> None:
    if launch.ready is not None:
        if launch.dying_after_ready is None:
            launch.dying_after_ready = line.no
    elif launch.dying is None:
        launch.dying = line.no
    tracker.last_evidence_t = t
