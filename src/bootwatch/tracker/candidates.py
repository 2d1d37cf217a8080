"""Failure evidence gathered during a launch, and the choice of the one line that explains it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bootwatch.tracker.parts import Failure
from bootwatch.tracker.tracebacks import EXC_NAME, Traceback

# Exceptions that mean "someone stopped the process", not "the process broke".
TERMINATIONS = {
    "KeyboardInterrupt",
    "SystemExit",
    "CancelledError",
    "asyncio.exceptions.CancelledError",
    "asyncio.CancelledError",
    "concurrent.futures._base.CancelledError",
}


@dataclass
class Candidate:
    line_no: int
    text: str
    proc: str | None
    kind: str  # traceback | fatal | loose | suspect | detail | death
    start_no: int  # where its block began (traceback header), else line_no
    category: str | None = None
    context: list[str] = field(default_factory=list)
    wrapper: bool = False
    cancelled: bool = False
    runtime: bool = False  # seen after the server was ready
    tb: Traceback | None = None  # for traceback candidates: the chain may still grow
    detail: str | None = None
    chain: list[str] = field(default_factory=list)
    level: str | None = None  # the line's log level, when its prefix says
    signal: bool = False  # a death: the signal the process died of (its echoes elsewhere are not causes)

    @property
    def termination(self) -> bool:
        return self.kind in ("traceback", "loose") and is_termination(self.text)


ERROR_NEAR_DEATH = 10  # lines: how close before a death an error line must be to explain it
DETAIL_AFTER = 8  # lines: how far below an exception line its message may go on (a build's output, CANN's report)


def from_traceback(tb: Traceback) -> Candidate:
    no, text = tb.exceptions[0]
    return Candidate(no, text, tb.proc, "traceback", tb.header_no, context=tb.context, tb=tb)


def is_termination(text: str) -> bool:
    m = EXC_NAME.match(text)
    return m is not None and m.group(1) in TERMINATIONS


def _first(cs: list[Candidate]) -> Candidate:
    return min(cs, key=lambda c: c.line_no)


def _by_tier(live: list[Candidate]) -> Candidate | None:
    """The first real exception, else a suspect line, else a loose exception line, else a termination."""
    tiers: tuple[Callable[[Candidate], bool], ...] = (
        lambda c: c.kind in ("traceback", "fatal") and not c.wrapper and not c.termination,
        lambda c: c.kind == "suspect",
        lambda c: c.kind == "loose" and not c.wrapper and not c.termination,
        lambda c: c.termination,
    )
    for belongs in tiers:
        tier = [c for c in live if belongs(c)]
        if tier:
            return _first(tier)
    return None


def _explaining_a_death(live: list[Candidate]) -> Candidate | None:
    """Only echoes and deaths: an error the server logged just before it died says more than they do; else the
    first fatal signal (faulthandler, abseil, a shell's job line) over the echoes of it in other processes (EOFError on
    the pipe, a dead actor, "Received sigquit"); else the first echo."""
    deaths = [c for c in live if c.kind == "death" or c.wrapper and c.kind in ("traceback", "fatal", "loose")]
    if not deaths:
        return None
    signals = [c for c in deaths if c.signal]
    first = _first(signals or deaths)
    near = [c for c in live if c.kind == "errlevel" and first.line_no - ERROR_NEAR_DEATH <= c.line_no < first.line_no]
    if near:
        return max(near, key=lambda c: c.line_no)
    if signals:
        return first
    return _first([c for c in deaths if c.kind != "death"] or deaths)


def _complete_copy(chosen: Candidate, live: list[Candidate]) -> Candidate:
    """A copy cut short by another process's interleaved write: prefer the complete copy. A later line that only
    adds an empty message ("KeyboardInterrupt: " after "KeyboardInterrupt") says nothing more: it is another
    exception of the same name (a second Ctrl-C's echo), not the rest of this one."""
    said = _said(chosen.text)
    for c in live:
        if c.line_no > chosen.line_no and len(_said(c.text)) > len(said) and c.text.startswith(chosen.text):
            return c
    return chosen


def _said(text: str) -> str:
    return text.rstrip(": \t")


def _logged_first(chosen: Candidate, live: list[Candidate]) -> Candidate:
    """`logger.exception(e)` prints the exception's message as an error line, then the traceback that ends in
    the same words: the log said why first there, and the exception line below is its detail."""
    if chosen.kind != "traceback" or ": " not in chosen.text:
        return chosen
    said = chosen.text.split(": ", 1)[1].strip()
    for c in live:
        if (
            c.kind == "errlevel"
            and chosen.start_no - 2 <= c.line_no < chosen.start_no
            and c.proc == chosen.proc
            and c.text.strip() == said
        ):
            return _standing_for(chosen, c, "traceback")
    return chosen


def _precise_detail(chosen: Candidate, live: list[Candidate]) -> Candidate:
    """A line that names the cause more precisely, printed just before or inside the chosen block, else just
    below its exception line, where a multi-line message goes on (a failed build's compiler output, Ascend
    CANN's report after torch_npu's RuntimeError)."""
    if chosen.kind == "detail":
        return chosen
    details = [c for c in live if c.kind == "detail"]
    before = [c for c in details if chosen.start_no - 5 <= c.line_no <= chosen.line_no]
    after = [c for c in details if chosen.line_no < c.line_no <= chosen.line_no + DETAIL_AFTER]
    near = before or after
    if not near:
        return chosen
    return _standing_for(chosen, near[0], "detail")


def _standing_for(chosen: Candidate, c: Candidate, kind: str) -> Candidate:
    """`c`'s line as the cause, with what was chosen before it (its category, context and words) as its detail."""
    return Candidate(c.line_no, c.text, c.proc, kind, c.line_no, chosen.category, chosen.context, detail=chosen.text)


def choose(cands: list[Candidate]) -> Candidate | None:
    """The root cause: the first real exception; wrappers, echoes and terminations only as a last resort."""
    live = [c for c in cands if not c.cancelled]
    chosen = _by_tier(live) or _explaining_a_death(live)
    if chosen is None:
        return None
    return _precise_detail(_logged_first(_complete_copy(chosen, live), live), live)


def same_failure_procs(chosen: Candidate, cands: list[Candidate]) -> list[str]:
    """The processes (ranks) that raised the same exception: reported once, ranks named."""
    procs = []
    for c in cands:
        if c.text == chosen.text and c.proc and c.proc not in procs:
            procs.append(c.proc)
    return procs


def failure_of(c: Candidate, procs: list[str]) -> Failure:
    # Line 0: the server died before printing a line (nothing in the log to point at).
    return Failure(
        c.line_no or None,
        c.text,
        c.category or "unknown",
        tuple(c.context[-15:]),
        c.detail or None,
        tuple(c.chain),
        tuple(procs),
    )
