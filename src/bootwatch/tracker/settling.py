"""Turning the evidence into a verdict on the launch: at the end of a recorded log, after a quiet spell
live, or when the server exits.

Lines only gather evidence (`evidence.py`); the failure is decided here, once the traceback that explains a
death has had time to be printed: its chain settled to the exception that names the cause, the root cause
chosen among the candidates (`candidates.choose`), its category found. The verdict machine
(`verdict/`) then reads the result through `Tracker.says`, and only it emits the `failed` event.
"""

from __future__ import annotations

import re
import signal as signals
from typing import TYPE_CHECKING

from bootwatch.lines import Line
from bootwatch.tracker.candidates import Candidate, choose, failure_of, is_termination, same_failure_procs
from bootwatch.tracker.events import Event
from bootwatch.tracker.evidence import ERROR_LEVELS, category, mark_dying
from bootwatch.tracker.launch import Launch
from bootwatch.tracker.phasing import confirm_tentative
from bootwatch.tracker.segmentation import back_before_split, new_launch

if TYPE_CHECKING:
    from bootwatch.tracker.tracker import Tracker

_BARE_ASSERT = re.compile(r"^(?:\w+\.)*AssertionError:?\s*$")
_VALIDATION_SUMMARY = re.compile(r"ValidationError: \d+ validation errors? for ")
# What the last words of a process that died unexplained look like when they explain it.
_ERRORISH = re.compile(
    r"(?i)\b(?:error|exception|fatal|failed|failure|not found|no such|denied|invalid|"
    r"unrecognized|cannot|can't|unable|abort|panic)\b"
)
_PHASE_CATEGORY = {
    "download": "weights",
    "load_weights": "weights",
    "load_draft": "weights",
    "distributed_init": "distributed",
    "compile": "compile",
    "cuda_graph": "compile",
    "warmup": "warmup",
    "config": "config",
    "start": "config",
    "kv_cache": "oom",
}


# ---- when ------------------------------------------------------------------------------------------
def settle(tracker: Tracker, now: float, server_alive: bool | None) -> list[Event]:
    """See `Tracker.settle`."""
    ev: list[Event] = []
    before = tracker.before_split
    if before is not None and before.dying is not None and before.failure is None:
        back_before_split(tracker)  # its death is still to be judged, and nothing after the break is a launch
    launch = tracker.launch
    if launch is None:
        return ev
    quiet = now - max(tracker.last_evidence_t or 0.0, launch.last_t or 0.0)
    pending = launch.dying if launch.ready is None else launch.dying_after_ready
    if pending is not None and tracker.last_evidence_t is not None and quiet >= tracker.grace_s:
        tracker.tb.flush()
        decide(tracker, launch, ev)
    elif (
        launch.ready is None
        and launch.failure is None
        and server_alive is not True
        and quiet >= tracker.quiet_fail_s
        and _ends_failed(tracker, launch, flush=False)
    ):
        tracker.tb.flush()
        if _ends_failed(tracker, launch, flush=True):
            decide(tracker, launch, ev)
    elif (
        launch.ready is None
        and launch.tentative is not None
        and server_alive is not False
        and quiet >= tracker.quiet_fail_s
        and not _ends_failed(tracker, launch, flush=False)
    ):
        confirm_tentative(launch, ev)
    return ev


def exited(tracker: Tracker, code: int | None, signal: int | None, reason: str | None) -> list[Event]:
    """See `Tracker.exited`."""
    ev: list[Event] = []
    # lines after a break that said nothing of a launch: the server's end is the launch before it's
    back_before_split(tracker)
    launch = tracker.launch
    if launch is None:
        # It died before printing anything a rule looks at (or anything at all): still a launch that failed.
        no, text = tracker.tail or (0, "")
        launch = new_launch(tracker, Line(no, text, text), tracker.forced or tracker.hinted or "unknown", ev)
        launch.last_no = no
    tracker.exit_info = {"code": code, "signal": signal}
    if reason is None:
        if signal == 9 or code in (137, -9):
            reason = "process killed (SIGKILL) with no traceback - likely the OOM killer"
        elif signal:
            reason = f"process terminated by signal {signal} ({_signal_name(signal)})"
        else:
            reason = f"process exited with code {code}"
    tracker.tb.flush()
    mark_dying(tracker, launch, Line(launch.last_no, reason, reason), launch.last_t)
    decide(tracker, launch, ev, reason=reason)
    return ev


def finish(tracker: Tracker) -> list[Event]:
    """See `Tracker.finish`."""
    ev: list[Event] = []
    back_before_split(tracker)
    launch = tracker.launch
    if launch is None:
        return ev
    tracker.tb.flush()
    if launch.ready is None:
        if _ends_failed(tracker, launch, flush=True):
            decide(tracker, launch, ev)
        elif launch.tentative is not None:
            confirm_tentative(launch, ev)
    elif launch.dying_after_ready is not None:
        decide(tracker, launch, ev)
    cur = launch.current
    if cur is not None and cur.end_line is None and launch.failure is None and cur.name != "ready":
        cur.end_line, cur.end_t, cur.end_log_t = launch.last_no, launch.last_t, launch.last_log_t
    return ev


def _ends_failed(tracker: Tracker, launch: Launch, flush: bool) -> bool:
    """Would the log, ended here, be a failed startup? (Open tracebacks count only once flushed.)"""
    return (
        launch.dying is not None
        or any(
            not c.cancelled and (c.kind in ("traceback", "fatal") or c.kind == "loose" and _last_words(launch, c))
            for c in launch.candidates
        )
        or (not flush and tracker.tb.busy)
    )


def _last_words(launch: Launch, c: Candidate) -> bool:
    """An exception the server logged as an error, or printed as nearly its last line, with nothing after
    it from the same process: what it died of, in a log that ends there."""
    if c.wrapper or c.termination:
        return False
    return c.level in ERROR_LEVELS or c.line_no >= launch.last_no - 2


# ---- what ------------------------------------------------------------------------------------------
def decide(tracker: Tracker, launch: Launch, ev: list[Event], reason: str | None = None) -> None:
    """The failure of the launch (or of the ready server), from its candidates; `reason`: how the process
    ended, when it did, the explanation of last resort."""
    runtime = launch.ready is not None
    for c in launch.candidates:
        if c.tb is not None:
            _settle_chain(launch, c)
    if runtime and launch.runtime_failure is not None or not runtime and launch.failure is not None:
        return
    cands = [c for c in (*launch.candidates, *launch.error_lines) if c.runtime == runtime]
    chosen = choose(cands)
    if chosen is None:
        if reason is None:
            return
        chosen = _unexplained(tracker, launch, reason)
    if chosen.category is None or chosen.category == "unknown":
        cat = category(launch, chosen.text)
        if cat is None and not runtime and launch.current is not None:
            cat = _PHASE_CATEGORY.get(launch.current.name)
        chosen.category = cat or "unknown"
    # The failure is the tracker's finding; the verdict machine decides what it means and says so (`failed`).
    f = failure_of(chosen, same_failure_procs(chosen, cands))
    if runtime:
        launch.runtime_failure = f
    else:
        launch.failure = f
        launch.close_phase(launch.last_no, launch.last_t)


def _settle_chain(launch: Launch, c: Candidate) -> None:
    """A chained traceback names its cause in its last exception (the error the library chose to
    raise, e.g. "OSError: ... is not a valid JSON file" over the JSONDecodeError it caught), unless that
    one only wraps or terminates: then the latest one that does not."""
    tb = c.tb
    if tb is None or not tb.exceptions:
        return
    wrappers = [r for r in launch.rules["fatal"] if r.role in ("wrapper", "death")]
    pick = tb.exceptions[0]
    for no, text in reversed(tb.exceptions):
        if not is_termination(text) and not any(r.regex.search(text) for r in wrappers):
            pick = (no, text)
            break
    c.line_no, c.text = pick
    detail = tb.details.get(pick[0])
    c.detail = detail[1] if detail else None
    if detail is not None and (_VALIDATION_SUMMARY.search(c.text) or c.text.endswith(":")):
        # pydantic's exception line only counts the errors, and a message cut at its colon continues below:
        # the line below says what is wrong.
        c.line_no, c.text, c.detail = detail[0], detail[1], c.text
    elif tb.last_assert is not None and _BARE_ASSERT.match(c.text) and tb.last_assert[0] < c.line_no:
        # A bare AssertionError says nothing; the assertion that failed, quoted in the last frame, does.
        c.line_no, c.text, c.detail = tb.last_assert[0], tb.last_assert[1].strip(), c.text
    c.chain = [t for _, t in tb.exceptions]
    c.wrapper = any(r.regex.search(c.text) for r in wrappers)


def _unexplained(tracker: Tracker, launch: Launch, reason: str) -> Candidate:
    """A death no rule explains: the last thing the server printed, when it reads like an error (a usage
    message, a missing module), is the best explanation there is; otherwise how the process ended."""
    if tracker.tail is not None:
        no, text = tracker.tail
        if no >= launch.start_line and _ERRORISH.search(text):
            c = Candidate(no, text, None, "death", no, None, list(launch.recent))
            c.detail = reason
            return c
    cat = _exit_category(tracker.exit_info)
    return Candidate(launch.last_no, reason, None, "death", launch.last_no, cat, list(launch.recent))


_KILLS = frozenset({signals.SIGKILL, signals.SIGTERM, signals.SIGINT, signals.SIGHUP})


def _exit_category(exit_info: dict[str, int | None] | None) -> str:
    """How the process ended, when nothing it printed says why: killed (SIGKILL, SIGTERM: from outside, the OOM
    killer), crashed (another signal: SIGSEGV, SIGABRT, SIGBUS), or exited (its own exit code)."""
    info = exit_info or {}
    sig, code = info.get("signal"), info.get("code")
    if sig in _KILLS or code in (137, 143, -9):
        return "killed"
    if sig:
        return "crashed"
    return "exited"


def _signal_name(n: int) -> str:
    try:
        return signals.Signals(n).name
    except ValueError:
        return f"signal {n}"
