"""Which launch a line belongs to: a log may hold several startups, each beginning at a launch line.

A banner begins a new launch unless the current one has not got anywhere yet (then it names its engine),
it is a child's banner (Ollama relaying llama-server), or it is a first_only banner repeated by a server
that is already up (a model reload). This runs as `Tracker.feed` builds a line's context, before any step:
every step works on the launch the line belongs to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bootwatch.engines.rules import Rule
from bootwatch.lines import Line
from bootwatch.tracker.events import Event, LaunchEvent
from bootwatch.tracker.launch import Launch
from bootwatch.tracker.phases import Phase

if TYPE_CHECKING:
    from bootwatch.tracker.tracker import Tracker

LAUNCH_WEIGHT = 3  # evidence a launch banner gives: it names its engine


def segment(tracker: Tracker, line: Line, hits: list[Rule], ev: list[Event]) -> Launch:
    """The launch this line belongs to: a launch line (a banner) may begin a new one, and so do a break in the log
    (a NUL run), and once the launch is up a bind error (another instance of the server: it cannot be this one's)
    or a line a new process prints as it starts (a restart appended to the same log)."""
    if tracker.split_at is not None and line.no >= tracker.split_at:
        tracker.split_at = None
        cur = tracker.launch
        if cur is not None and cur.start_line < line.no and cur.ready is None:
            # Another writer's lines (a second instance's, an older daemon's): a launch once they say something of
            # one; until then the launch before the break is the one judged (its bind error). After readiness the
            # lines are the ready server's own, as a log truncated under it (copytruncate) goes on: a new instance
            # still begins its launch by its banner, its bind error or its restart line.
            new_launch(tracker, line, tracker.forced or tracker.hinted or "unknown", ev, announce=False)
            tracker.before_split = cur
    if not hits and tracker.launch is not None:
        return tracker.launch  # most lines: no rule matched, so no banner
    cur = tracker.launch
    if cur is not None and cur.ready is not None and (_binds_in_vain(cur, hits) or _restarts(cur, hits)):
        new_launch(tracker, line, cur.engine, ev)
    hit_ids = {id(r) for r in hits if r.kind == "launch" and not r.restart}
    for engine, rule in tracker.book.launch if hit_ids else ():
        if id(rule) in hit_ids:
            launch = _launch_line(tracker, line, tracker.forced or engine, rule, ev)
            if launch is not None:
                return launch
    if tracker.launch is None:
        new_launch(tracker, line, tracker.forced or tracker.hinted or "unknown", ev)
    assert tracker.launch is not None
    return tracker.launch


def _launch_line(tracker: Tracker, line: Line, engine: str, rule: Rule, ev: list[Event]) -> Launch | None:
    """A launch line: the launch it begins or belongs to, or None when it is no launch line here."""
    cur = tracker.launch
    if cur is not None and rule.first_only and cur.first_only_seen:
        return None  # a model reloaded by a server that is already up is serving, not a new startup
    if cur is not None and _child_banner(tracker, cur, engine):
        cur.scores[engine] = cur.scores.get(engine, 0) + 1
        return None
    if cur is None or cur.progressed or rule.source in cur.markers:
        first_only_seen = cur is not None and rule.first_only and cur.first_only_seen
        up = cur.ready or cur.server_ready if cur is not None and rule.first_only else None
        cur = new_launch(tracker, line, engine, ev)
        cur.first_only_seen = first_only_seen
        cur.server_ready = up  # a model load of a server already up (Ollama): the server's own readiness
        cur.engine_by_banner = not tracker.forced
    elif cur.engine == "unknown" and not cur.forced_engine:
        cur.engine, cur.rules = engine, tracker.book.for_engine(engine)
    cur.first_only_seen |= rule.first_only
    cur.scores[engine] = cur.scores.get(engine, 0) + LAUNCH_WEIGHT
    cur.markers.add(rule.source)
    return cur


def _binds_in_vain(launch: Launch, hits: list[Rule]) -> bool:
    """A port-in-use failure of the launch's engine: its port is bound, so this is another instance failing."""
    binds = [r for r in hits if r.kind == "fatal" and r.category == "port_in_use"]
    return bool(binds) and any(m is r for m in launch.rules["fatal"] for r in binds)


def _restarts(launch: Launch, hits: list[Rule]) -> bool:
    """A line a new process of the launch's engine prints as it starts (no banner: vLLM's platform detection,
    uvicorn's `Started server process [pid]` once the last one said `Finished server process`), after the launch
    was ready: the server was started again, in the same log (`>>`, appended logs). The new launch is judged on
    its own; the old one's readiness is not its."""
    return any(
        r.restart and (r.needs is None or r.needs in launch.flags) and any(r is x for x in launch.rules["launch"])
        for r in hits
    )


def _child_banner(tracker: Tracker, cur: Launch, engine: str) -> bool:
    """The banner of an engine this one runs as a child (Ollama relaying llama-server) while it is still
    starting: part of this launch."""
    return (
        not tracker.forced
        and cur.ready is None
        and cur.failure is None
        and engine in tracker.book.for_engine(cur.engine).runs
    )


def new_launch(tracker: Tracker, line: Line, engine: str, ev: list[Event], announce: bool = True) -> Launch:
    """Begin a launch at this line: open tracebacks and pending evidence belong to the one before. `announce`:
    say so now (a launch after a break in the log is said once it says something: `announce_after_split`)."""
    tracker.tb.flush()
    tracker.launches += 1
    tracker.last_evidence_t = None
    launch = Launch(engine, tracker.book.for_engine(engine), line.no, line.t, forced_engine=bool(tracker.forced))
    launch.phases.append(Phase("start", line.no, line.t, start_log_t=line.log_t))
    tracker.launch = launch
    tracker.before_split = None
    if tracker.launches > 1 and announce:
        ev.append(LaunchEvent(t=line.t, line_no=line.no, launch=tracker.launches))
    return launch


def announce_after_split(tracker: Tracker, launch: Launch, ev: list[Event]) -> None:
    """The lines after a break in the log said something of a launch (a phase, readiness, a failure): it is one."""
    if launch.progressed:
        tracker.before_split = None
        ev.append(LaunchEvent(t=launch.start_t, line_no=launch.start_line, launch=tracker.launches))


def back_before_split(tracker: Tracker) -> None:
    """The lines after the break never said anything of a launch: the launch before it is the log's."""
    if tracker.before_split is not None:
        tracker.launch, tracker.before_split = tracker.before_split, None
        tracker.launches -= 1
