"""The one place that decides how a watched startup ended.

A pure state machine: it is fed typed signals (what the log says of the launch, output arriving, the server
process or the source dying, probe answers, the verification's answer, timer ticks, the end of a recorded log)
and decides the state: starting, then ready, failed, stalled, timed out, incomplete, or (after readiness)
stopped or died. It never does I/O and never reads the clock: every signal carries its time, so a test drives
it with made-up times and a live session with the wall clock, through the same decisions.

Its decisions are events, and only it emits them: `ready` (with the `ready` phase), `failed`, `timeout`,
`stalled`, and a `state` event at each change of state; the warnings on the way (`stall`, `activity`) too.
The root cause itself is the tracker's (it reads the lines); this machine decides whether there is a failure
at all, and its `decision` is what the summary says.
"""

from __future__ import annotations

from dataclasses import dataclass

from bootwatch.durations import fmt_duration
from bootwatch.tracker.events import (
    ActivityEvent,
    Event,
    FailedEvent,
    PhaseEvent,
    ReadyEvent,
    StalledEvent,
    StallEvent,
    StateEvent,
    TimeoutEvent,
)
from bootwatch.tracker.parts import Failure, Ready
from bootwatch.tracker.verdict.outcomes import Outcome, State, Verdict
from bootwatch.tracker.verdict.signals import (
    InputEnd,
    LogSays,
    Output,
    ProbeAnswer,
    ProcessExit,
    Signal,
    Tick,
    VerifyResult,
)
from bootwatch.tracker.verdict.stall import ACTIVITY_AFTER_S, ACTIVITY_EVERY_S, ACTIVITY_FRESH_S, stall_state
from bootwatch.vocab.activity import CHECKED, Activity


@dataclass(frozen=True)
class Policy:
    timeout_s: float = 3600.0
    stall_s: float | None = 600.0
    verify: bool = False  # ready also needs one generated token
    replay: bool = False  # the end of the input ends the watch
    follow_after_ready: bool = False  # run: keep following until the server exits
    probe_required: bool = True  # a URL the user gave must answer; a guessed one only helps
    has_probe: bool = False
    has_server: bool = False  # we started it: its exit ends the watch
    # The signals' times are a clock the watch ran on (live, replay); False for a log read with nothing but its
    # own timestamps (report), where a time to ready exists only on the log's clock.
    clocked: bool = True


@dataclass(frozen=True)
class Decision:
    """What the machine decided, for the summary: the parts are set only where the verdict allows them."""

    verdict: Verdict
    state: State
    ready: Ready | None
    failure: Failure | None
    runtime_failure: Failure | None
    time_to_ready_s: float | None


class VerdictMachine:
    def __init__(self, policy: Policy, start: float) -> None:
        self.policy = policy
        self.start = start
        self.outcome: Outcome | None = None
        self.state = State.STARTING
        self.ready_at: float | None = None  # when it became ready (before a verification's answer)
        self.ready: Ready | None = None  # the readiness accepted (and said)
        self.time_to_ready_s: float | None = None
        self.log = LogSays.nothing(start)
        self.last_output = start
        self.probe_up = False
        self.probe_url = ""
        self.verify: VerifyResult | None = None
        self.verify_pending = False
        self.exited: ProcessExit | None = None
        self.input_ended = False
        self._candidate: tuple[Ready, float | None, float] | None = None  # awaiting the verification
        self._runtime_said = False
        self._stall_warned = False
        self._cpu: float | None = None
        self.last_moved = start  # the last sample in which the tree moved (read, computed, compiled)
        self._activity: Activity | None = None
        self._activity_said: tuple[float, str] | None = None  # when, and what kind, last said

    # ---- input -------------------------------------------------------------------------------------------
    def feed(self, signal: Signal) -> list[Event]:
        """Take one signal in; the events it decided (none once the watch is over: an outcome is final)."""
        if self.outcome is not None:
            # Decided: a late answer (a verification, an exit) changes nothing. What the log says still reaches
            # the summary's parts (a death after ready, while `--then` runs).
            if isinstance(signal, LogSays):
                self.log = signal
            return []
        if isinstance(signal, LogSays):
            self.log = signal
        elif isinstance(signal, Output):
            self.last_output = max(self.last_output, signal.t)
        elif isinstance(signal, ProcessExit):
            self.exited = signal
        elif isinstance(signal, ProbeAnswer):
            self.probe_up = signal.up
            self.probe_url = signal.url or self.probe_url
        elif isinstance(signal, VerifyResult):
            self.verify, self.verify_pending = signal, False
        elif isinstance(signal, Tick):
            self._cpu = signal.cpu_percent
            a = signal.activity
            if a is not None:
                self._activity = a
                if a.moved(self.log.phase):
                    self.last_moved = max(self.last_moved, a.t)
        elif isinstance(signal, InputEnd):
            self.input_ended = True
        out: list[Event] = []
        self._decide(signal.t, out)
        return out

    # ---- transitions -------------------------------------------------------------------------------------
    def _end(self, outcome: Outcome, t: float, out: list[Event]) -> None:
        self.outcome = outcome
        self._enter(State(outcome.value), t, out)

    def _enter(self, state: State, t: float, out: list[Event]) -> None:
        self.state = state
        ttr = self.time_to_ready_s if state is State.READY else None
        out.append(StateEvent(t=t, state=state.value, phase=self.log.phase, time_to_ready_s=ttr))

    def _fail(self, failure: Failure | None, t: float, out: list[Event]) -> None:
        if failure is not None:
            out.append(failed_event(failure, t, runtime=False))
        self._end(Outcome.FAILED, t, out)

    def _accept(self, ready: Ready, ttr: float | None, t: float, out: list[Event], end: bool = True) -> None:
        """Readiness, decided: the `ready` phase (when a line said it) and event, then the state (`end`: the
        watch ends on it unless it follows the server after ready)."""
        self.ready, self.time_to_ready_s = ready, ttr
        if ready.line_no is not None:
            t_line = self.log.ready_t if self.log.ready_t is not None else t
            out.append(PhaseEvent(t=t_line, name="ready", line_no=ready.line_no, draft=False, text=ready.text))
        out.append(ReadyEvent(t=t, line_no=ready.line_no, text=ready.text))
        if self.policy.follow_after_ready or not end:
            self._enter(State.READY, t, out)
        else:
            self._end(Outcome.READY, t, out)

    # ---- decisions ---------------------------------------------------------------------------------------
    def _ready_now(self) -> bool:
        log = self.log
        if log.failed or log.dying:
            return False
        if self.policy.has_probe and self.policy.probe_required:
            # The user asked for a URL: a log that says ready is not enough, the URL must answer.
            return self.probe_up
        # A guessed URL answering 200 from our own process also counts: some logs never say ready (SGLang at
        # --log-level warning).
        return log.ready or self.probe_up

    def _decide(self, now: float, out: list[Event]) -> None:
        if self.exited is not None:
            self._decide_exit(now, out)
        elif self.ready_at is None:
            self._decide_starting(now, out)
        else:
            self._decide_ready(now, out)

    def _decide_exit(self, now: float, out: list[Event]) -> None:
        """The server or the source is gone: before readiness it failed; after, it stopped or died."""
        assert self.exited is not None
        log = self.log
        if self.ready is None and not log.failed and not log.dying and (self.ready_at is not None or log.ready):
            # It said ready and then went away before the machine could take it (a --url not yet answering, a
            # verification not yet answered): the startup was ready.
            ready, ttr, _ = self._candidate or self._ready_part(now)
            self._accept(ready, ttr, now, out, end=False)
        if self.ready is None:
            self._fail(log.failure, now, out)
            return
        self._say_runtime(now, out)
        clean = self.exited.clean and not log.runtime_failed
        self._end(Outcome.STOPPED if clean else Outcome.DIED, now, out)

    def _decide_starting(self, now: float, out: list[Event]) -> None:
        p, log = self.policy, self.log
        if log.failed:
            self._fail(log.failure, now, out)
        elif self._ready_now():
            self._became_ready(now, out)
        elif self.input_ended and p.replay:
            self._end(Outcome.INCOMPLETE, now, out)
        elif now - self.start >= p.timeout_s:
            msg = f"not ready after {fmt_duration(now - self.start)} (in {log.phase})"
            out.append(TimeoutEvent(t=now, message=msg))
            self._end(Outcome.TIMEOUT, now, out)
        else:
            self._stall(now, out)

    def _ready_part(self, now: float) -> tuple[Ready, float | None, float]:
        """What made it ready (the log's line, else the probe), its time to ready, and when."""
        log = self.log
        if log.ready:
            ready = log.ready_line or Ready(None, log.last_line or "the log said ready")
            if log.caught_up:
                span = log.caught_up_span
                return ready, (round(max(0.0, span), 3) if span is not None else None), now
            if log.ready_t is not None and log.start_t is not None:
                return ready, round(max(0.0, log.ready_t - log.start_t), 3), now
        else:
            ready = Ready(None, f"{self.probe_url or 'the URL'} answered 200")
        return ready, round(now - self.start, 3) if self.policy.clocked else None, now

    def _became_ready(self, now: float, out: list[Event]) -> None:
        self.ready_at = now
        candidate = self._ready_part(now)
        if self.policy.verify:
            # Ready means the model generates: the session asks for one token, the answer decides.
            self._candidate, self.verify_pending = candidate, True
            return
        self._accept(candidate[0], candidate[1], now, out)

    def _decide_ready(self, now: float, out: list[Event]) -> None:
        """After readiness: the verification's answer, then (following) a runtime death of a server we do not
        hold the process of."""
        if self._candidate is not None and (self.log.failed or self.log.dying):
            # The log failed the startup while the token was asked for: it was never ready. A death still
            # printing its explanation is waited for, as before readiness.
            if self.log.failed:
                self._candidate, self.verify_pending = None, False
                self._fail(self.log.failure, now, out)
            return
        if self.verify_pending:
            return
        if self._candidate is not None and self.verify is not None:
            ready, ttr, _ = self._candidate
            self._candidate = None
            if not self.verify.ok:
                self._fail(Failure.of_verify(self.verify.error), now, out)
                return
            self._accept(ready, ttr, now, out)
            if self.outcome is not None:
                return
        self._say_runtime(now, out)
        if self.log.runtime_failed and not self.policy.has_server:
            self._end(Outcome.DIED, now, out)

    def _say_runtime(self, now: float, out: list[Event]) -> None:
        """A failure after readiness, said once, as soon as the log has explained it."""
        rf = self.log.runtime_failure
        if rf is not None and self.ready is not None and not self._runtime_said:
            self._runtime_said = True
            out.append(failed_event(rf, now, runtime=True))

    @property
    def quiet_since(self) -> float:
        """Since when nothing has moved: no output, and (when the tree is watched) no reads, CPU or compiler."""
        return max(self.last_output, self.last_moved)

    def _say_activity(self, now: float, out: list[Event]) -> None:
        """The log is silent but the tree moves: say what, when it starts and then every so often (or when
        what moves changes: reading, then compiling)."""
        a, silent = self._activity, now - self.last_output
        if silent < ACTIVITY_AFTER_S:
            self._activity_said = None
        if a is None or silent < ACTIVITY_AFTER_S or not a.moved(self.log.phase) or now - a.t > ACTIVITY_FRESH_S:
            return
        said = self._activity_said
        if said is not None and said[1] == a.kind and now - said[0] < ACTIVITY_EVERY_S:
            return
        self._activity_said = (now, a.kind)
        msg = f"no output for {fmt_duration(silent)} in {self.log.phase}, but it moves: {a.describe()}"
        out.append(
            ActivityEvent(t=now, phase=self.log.phase, silent_s=round(silent, 1), message=msg, details=a.to_json())
        )

    def _stall(self, now: float, out: list[Event]) -> None:
        phase = self.log.phase
        self._say_activity(now, out)
        st = stall_state(self.policy.stall_s, phase, now - self.quiet_since)
        if st is None or not st.warn:
            self._stall_warned = False
            return
        cpu = self._cpu
        if self._activity is not None:
            # What was checked is the evidence: nothing at all moved, not merely the log.
            msg = (
                f"nothing moved for {fmt_duration(st.silent_s)} in {phase} (limit {fmt_duration(st.limit_s)}): "
                f"{CHECKED}; last line: {self.log.last_line[:200]}"
            )
        else:
            busy = (
                ""
                if cpu is None
                else (
                    f"; the server still uses CPU ({cpu:.0f}% of a core)"
                    if cpu >= 5
                    else "; the server is idle (no CPU)"
                )
            )
            msg = (
                f"no output for {fmt_duration(st.silent_s)} in {phase} (limit {fmt_duration(st.limit_s)})"
                f"{busy}; last line: {self.log.last_line[:200]}"
            )
        if not self._stall_warned:
            self._stall_warned = True
            out.append(StallEvent(t=now, phase=phase, silent_s=round(st.silent_s, 1), message=msg, cpu_percent=cpu))
        if st.stalled:
            out.append(StalledEvent(t=now, phase=phase, message=msg))
            self._end(Outcome.STALLED, now, out)

    # ---- output ------------------------------------------------------------------------------------------
    @property
    def verify_failed(self) -> bool:
        return self.verify is not None and not self.verify.ok

    def verdict(self, outcome: Outcome | None = None) -> Verdict:
        """The startup's verdict once the watch ended with `outcome` (default: the machine's own)."""
        outcome = outcome or self.outcome
        if self.verify_failed:
            return Verdict.FAILED  # the log said ready but the model did not generate
        if outcome in (Outcome.READY, Outcome.STOPPED, Outcome.DIED) and self.ready is not None:
            return Verdict.READY
        if outcome is Outcome.DIED or outcome is Outcome.FAILED:
            return Verdict.FAILED
        if outcome in (Outcome.STALLED, Outcome.TIMEOUT, Outcome.INCOMPLETE):
            return Verdict(outcome.value)
        # Interrupted, or asked before the end: what is decided so far.
        if self.log.failed:
            return Verdict.FAILED
        return Verdict.READY if self.ready is not None else Verdict.INCOMPLETE

    def decision(self, outcome: Outcome | None = None) -> Decision:
        """The verdict and the parts it allows: `ready` (and a runtime failure) only for a ready startup,
        `failure` only for a failed one."""
        verdict = self.verdict(outcome)
        ready = self.ready if verdict is Verdict.READY else None
        failure = None
        if verdict is Verdict.FAILED:
            failure = Failure.of_verify(self.verify.error) if self.verify is not None and self.verify_failed else None
            failure = failure or self.log.failure
        runtime = self.log.runtime_failure if verdict is Verdict.READY else None
        ttr = self.time_to_ready_s if verdict is Verdict.READY else None
        return Decision(verdict, self.state, ready, failure, runtime, ttr)


def failed_event(f: Failure, t: float, runtime: bool) -> FailedEvent:
    """A failure as the `failed` event (the summary's `failure` shape, and whether it came after ready)."""
    return FailedEvent(
        t=t,
        line_no=f.line_no,
        text=f.text,
        category=f.category,
        context=list(f.context),
        detail=f.detail,
        chain=list(f.chain) if len(f.chain) > 1 else None,
        procs=list(f.procs) or None,
        node=f.node,
        runtime=runtime,
    )


def log_decision(log: LogSays) -> Decision:
    """A log read to its end with nothing else to go by (report, replay's catch-up): ready or failed as it
    says, else incomplete (never a guess)."""
    m = VerdictMachine(Policy(timeout_s=float("inf"), stall_s=None, replay=True, clocked=False), log.t)
    m.feed(log)
    m.feed(InputEnd(log.t))
    return m.decision()


def log_verdict(log: LogSays) -> Verdict:
    return log_decision(log).verdict


__all__ = ["Decision", "Policy", "VerdictMachine", "failed_event", "log_decision", "log_verdict"]
