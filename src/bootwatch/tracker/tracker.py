"""Lines in, events out: the public face of the tracker.

`Tracker` holds what outlives a line (the current launch, the traceback assembler, the rule book, the
serving side) and runs each line through `steps.STEPS`, a list of small steps, each one job in a module of
its own: segmentation (which launch), detection (which engine), evidence (tracebacks and what else says the
server is failing), facts, phasing (phases, progress, readiness). `settling.py` turns evidence into a
verdict at the end of a log, after a quiet spell, or when the server exits.

The tracker never does I/O and never looks at the wall clock itself: live callers pass the time in
(`settle`, `exited`), so recorded and live input run through exactly the same decisions.
"""

from __future__ import annotations

from typing import Any

from bootwatch.engines.rules import Rule, RuleBook
from bootwatch.lines import Line
from bootwatch.tracker import settling
from bootwatch.tracker.after_ready import ServingFollower
from bootwatch.tracker.context import LineContext
from bootwatch.tracker.detection import detect_positions, prefix_engines, target_engines
from bootwatch.tracker.events import Event, FactEvent, PhaseEvent, ProgressSoFarEvent, WarningEvent
from bootwatch.tracker.launch import Launch
from bootwatch.tracker.segmentation import announce_after_split, segment
from bootwatch.tracker.steps import STEPS, STEPS_WITHOUT_HITS
from bootwatch.tracker.summary import LiveFacts, Summary, summarize
from bootwatch.tracker.tracebacks import TracebackAssembler
from bootwatch.tracker.verdict import Decision, LogSays, Verdict, log_decision


class Tracker:
    def __init__(
        self,
        book: RuleBook,
        serving: ServingFollower,
        engine: str | None = None,
        grace_s: float = 1.5,
        quiet_fail_s: float = 5.0,
    ) -> None:
        self.book = book
        self.forced = engine
        self.hinted: str | None = None  # the engine its command line starts (`run`), until a line names one
        self.split_at: int | None = None  # a line from which on the log is another launch's (after a NUL run)
        # The launch before that break while the current one, begun at it, has said nothing of a launch (another
        # writer's lines): the one the log's story is about until then
        self.before_split: Launch | None = None
        self.grace_s = grace_s
        self.quiet_fail_s = quiet_fail_s
        self.fmt_engine = prefix_engines(book)  # prefix family -> the one engine that prints it
        self.target_engine = target_engines(book)  # Rust crate -> the one engine that logs from it
        self.detect_at = detect_positions(book)  # id of a detect rule -> where it is in book.detect
        self.launch: Launch | None = None
        self.launches = 0
        self.tb = TracebackAssembler()
        self.exit_info: dict[str, Any] | None = None
        self.tail: tuple[int, str] | None = None  # the last non-blank line the reader saw (number, text)
        self.last_evidence_t: float | None = None  # the log's clock at the latest evidence of death
        self.serving = serving  # stats lines after ready (serving.ServingTracker; given, as serving sits above)

    def hint_command(self, argv: list[str]) -> None:
        """`run` knows the command: its engine is the launch's until the log names one (a server that dies on its
        arguments prints no banner)."""
        self.hinted = self.book.engine_of_command(argv)

    def split_before(self, line_no: int) -> None:
        """The log breaks at this line (a NUL run: truncated under its writer, or another writer's appends): the
        lines from it on are another launch's."""
        if self.split_at is None:
            self.split_at = line_no

    # ---- input -------------------------------------------------------------------------------------
    @property
    def wants_all_lines(self) -> bool:
        # a traceback goes on, a launch begins at the split (its first line counts), a panic's message follows
        return (
            self.tb.busy or self.split_at is not None or self.launch is not None and self.launch.cause_next is not None
        )

    def feed(self, line: Line) -> list[Event]:
        """One line through the steps, in order, until one consumes it: the events it gave."""
        hits = self.book.matching(line.text) if line.text else []
        events: list[Event] = []
        # Segmentation runs as the context is built: every step works on the launch the line belongs to.
        ctx = LineContext(line, hits, segment(self, line, hits, events), events)
        for step in STEPS if hits else STEPS_WITHOUT_HITS:
            step(self, ctx)
            if ctx.consumed:
                break
        if self.before_split is not None:
            announce_after_split(self, ctx.launch, events)
        return events

    def settle(self, now: float, server_alive: bool | None = None) -> list[Event]:
        """Live: a death seen in the log becomes a verdict once the log has been quiet for a moment, so that
        the traceback that explains it has been printed. Weaker evidence (a traceback, an exception logged as an
        error, with no death line after it) becomes one after a longer quiet, and only when nothing says the
        server still runs: what `finish` would call a failure if the log ended there."""
        return settling.settle(self, now, server_alive)

    def exited(self, code: int | None, signal: int | None, reason: str | None = None) -> list[Event]:
        """The server (or a child that matters) is gone: whatever the log says, it died."""
        return settling.exited(self, code, signal, reason)

    def finish(self) -> list[Event]:
        """End of a recorded log: pending tracebacks count; a log that just stops is incomplete."""
        return settling.finish(self)

    # ---- output ------------------------------------------------------------------------------------
    def snapshot(self) -> list[Event]:
        """The current launch so far, as a few events: its phases, where the last one stands, facts and
        warnings (for a watcher that arrives while the server is already starting)."""
        launch = self.judged()
        if launch is None:
            return []
        ev: list[Event] = []
        for p in launch.phases:
            # `start` is implied; `ready` is the verdict machine's to say, once it takes it.
            if p.name not in ("start", "ready"):
                ev.append(PhaseEvent(t=p.start_t, name=p.name, line_no=p.start_line, draft=p.draft, text=""))
        cur = launch.current
        if cur is not None and cur.progress is not None:
            ev.append(
                ProgressSoFarEvent(
                    t=launch.last_t,
                    phase=cur.name,
                    n=cur.n,
                    total=cur.total,
                    progress=cur.progress,
                    line_no=launch.last_no,
                )
            )
        for name, value in launch.facts.items():
            ev.append(FactEvent(t=launch.last_t, name=name, value=value, line_no=launch.fact_lines.get(name)))
        ev += [WarningEvent.of(launch.last_t, w) for w in launch.warnings]
        if launch.ready is not None and (serving := self.serving.latest()) is not None:
            ev.append(serving)  # serving already: its latest numbers
        return ev

    def judged(self) -> Launch | None:
        """The launch the log's story is about: the current one, or the one before a break in the log while the
        lines after it have said nothing of a launch."""
        return self.before_split or self.launch

    def says(self, t: float) -> LogSays:
        """What the log says of the current launch, for the verdict machine."""
        launch = self.judged()
        if launch is None:
            return LogSays.nothing(t)
        cur = launch.current
        ready_t = cur.start_t if launch.ready is not None and cur is not None and cur.name == "ready" else None
        return LogSays(
            t,
            ready=launch.ready is not None,
            failed=launch.failure is not None,
            dying=launch.dying is not None and launch.ready is None,
            runtime_failed=launch.runtime_failure is not None,
            phase=cur.name if cur is not None else "start",
            last_line=launch.last_line or (launch.recent[-1] if launch.recent else ""),
            ready_line=launch.ready,
            failure=launch.failure,
            runtime_failure=launch.runtime_failure,
            ready_t=ready_t,
            start_t=launch.phases[0].start_t if launch.phases else launch.start_t,
            caught_up=launch.caught_up,
            caught_up_span=_log_span(launch) if launch.caught_up and ready_t is not None else None,
        )

    def verdict(self) -> Verdict:
        """The verdict on the log read so far, as if it ended here (report, and a watch's catch-up)."""
        return self.decision().verdict

    def decision(self) -> Decision:
        """What the log read so far decides on its own (report): ready or failed as it says, else incomplete."""
        launch = self.judged()
        return log_decision(self.says(launch.last_t or 0.0 if launch else 0.0))

    def summary(
        self, decision: Decision | None = None, live: LiveFacts | None = None, lines: int | None = None
    ) -> Summary:
        """The summary of the current launch: its facts, with the verdict machine's `decision` (default: the
        log's own, as `report` has nothing else to go by) and what a live watch saw beside the log."""
        launch = self.judged()
        decision = decision or self.decision()
        counted = {} if lines is None else {"lines": lines}
        if launch is None:
            details = {"launches": 0, "exit": self.exit_info, **counted}
            return summarize(decision, self.forced or "unknown", None, [], {}, [], details, live)
        return summarize(
            decision,
            engine=launch.engine,
            engine_version=_str_or_none(launch.facts.get("engine_version")),
            phases=[p.to_json() for p in launch.phases],
            facts=dict(launch.facts),
            warnings=list(launch.warnings),
            details={
                "engine_display": self.book.for_engine(launch.engine).display or launch.engine,
                "engine_evidence": dict(launch.scores),
                "launches": self.launches - (launch is not self.launch),  # an unsaid launch after a break is none
                "exit": self.exit_info,
                "launch_start_line": launch.start_line,
                "server_ready": launch.server_ready.to_json() if launch.server_ready else None,
                "model_loads": {"count": launch.loads, "last": launch.last_load.to_json()}
                if launch.last_load is not None
                else None,
                "caught_up": launch.caught_up,
                "launch_t": launch.phases[0].start_log_t if launch.phases else None,
                "last_line_no": launch.last_no,
                "serving": self.serving.summary(),
                **counted,
            },
            live=live,
        )


def _log_span(launch: Launch) -> float | None:
    """From the launch's first phase to its ready phase, by the log's own timestamps, when both have one."""
    first, cur = launch.phases[0], launch.current
    if cur is None or first.start_log_t is None or cur.start_log_t is None:
        return None
    return cur.start_log_t - first.start_log_t


def _str_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


__all__ = ["Tracker", "Rule"]
