"""The verdict machine driven by hypothesis through random sequences of signals, under random policies, with
the invariants every surface relies on checked after each step: an outcome is final; ready is never said with
a death pending; died and stopped come only after ready; stalled only after the phase's silence limit; and
the events say exactly what the machine decided (one `ready` at most, a `state` event for each change)."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from bootwatch.tracker.events import Event, FailedEvent, ReadyEvent, StalledEvent, StateEvent, TimeoutEvent
from bootwatch.tracker.parts import Failure, Ready
from bootwatch.tracker.verdict import (
    STALL_FACTOR,
    InputEnd,
    LogSays,
    Outcome,
    Output,
    Policy,
    ProbeAnswer,
    ProcessExit,
    State,
    Tick,
    Verdict,
    VerdictMachine,
    VerifyResult,
    stall_limit,
)

PHASES = sorted(STALL_FACTOR)
dt = st.floats(min_value=0.0, max_value=400.0, allow_nan=False)


class VerdictModel(RuleBasedStateMachine):
    @initialize(
        timeout_s=st.sampled_from([30.0, 600.0, 3600.0]),
        stall_s=st.sampled_from([None, 10.0, 120.0]),
        verify=st.booleans(),
        replay=st.booleans(),
        follow=st.booleans(),
        has_probe=st.booleans(),
        probe_required=st.booleans(),
        has_server=st.booleans(),
    )
    def start(self, **kw: object) -> None:
        self.policy = Policy(
            timeout_s=kw["timeout_s"],  # type: ignore[arg-type]
            stall_s=kw["stall_s"],  # type: ignore[arg-type]
            verify=bool(kw["verify"]),
            replay=bool(kw["replay"]),
            follow_after_ready=bool(kw["follow"]),
            has_probe=bool(kw["has_probe"]),
            probe_required=bool(kw["probe_required"]),
            has_server=bool(kw["has_server"]),
        )
        self.m = VerdictMachine(self.policy, 0.0)
        self.t = 0.0
        self.events: list[Event] = []
        self.outcome_seen: Outcome | None = None
        self.log = LogSays.nothing(0.0)
        self.last_output = 0.0

    def _feed(self, signal: object) -> None:
        before = self.m.outcome
        out = self.m.feed(signal)  # type: ignore[arg-type]
        if before is not None:
            assert out == [], "an outcome is final: nothing is said after it"
        for ev in out:
            if isinstance(ev, ReadyEvent):
                # Said only for a log (or probe) that shows no death and no failure now.
                assert not self.m.log.dying and not self.m.log.failed, self.m.log
            if isinstance(ev, StalledEvent):
                # Only once the phase's limit of silence has passed (nothing output, nothing moved).
                assert self.policy.stall_s is not None
                silent = (ev.t or 0.0) - self.m.quiet_since
                assert silent >= stall_limit(self.policy.stall_s, ev.phase), (silent, ev.phase)
        self.events += out

    def _advance(self, d: float) -> None:
        self.t += d

    @rule(
        d=dt,
        ready=st.booleans(),
        failed=st.booleans(),
        dying=st.booleans(),
        runtime_failed=st.booleans(),
        phase=st.sampled_from(PHASES),
    )
    def log_says(self, d: float, ready: bool, failed: bool, dying: bool, runtime_failed: bool, phase: str) -> None:
        self._advance(d)
        self.log = LogSays(
            self.t,
            ready=ready,
            failed=failed,
            dying=dying,
            runtime_failed=runtime_failed,
            phase=phase,
            ready_line=Ready(4, "Application startup complete.") if ready else None,
            failure=Failure(8, "RuntimeError: boom", "unknown") if failed else None,
            runtime_failure=Failure(9, "died", "unknown") if runtime_failed else None,
            ready_t=self.t if ready else None,
            start_t=0.0,
        )
        self._feed(self.log)

    @rule(d=dt)
    def output(self, d: float) -> None:
        self._advance(d)
        self.last_output = self.t
        self._feed(Output(self.t))

    @rule(d=dt)
    def tick(self, d: float) -> None:
        self._advance(d)
        self._feed(Tick(self.t))

    @rule(d=dt, up=st.booleans())
    def probe(self, d: float, up: bool) -> None:
        self._advance(d)
        self._feed(ProbeAnswer(self.t, up, "http://127.0.0.1:8000/health"))

    @precondition(lambda self: self.m.verify_pending)
    @rule(d=dt, ok=st.booleans())
    def verify(self, d: float, ok: bool) -> None:
        self._advance(d)
        self._feed(VerifyResult(self.t, ok, 0.1, "" if ok else "HTTP 500"))

    @rule(d=dt, clean=st.booleans())
    def exit(self, d: float, clean: bool) -> None:
        self._advance(d)
        self._feed(ProcessExit(self.t, clean))

    @rule(d=dt)
    def input_end(self, d: float) -> None:
        self._advance(d)
        self._feed(InputEnd(self.t))

    # ---- invariants ----------------------------------------------------------------------------------
    @invariant()
    def an_outcome_is_final(self) -> None:
        if self.outcome_seen is not None:
            assert self.m.outcome is self.outcome_seen
        self.outcome_seen = self.m.outcome

    @invariant()
    def died_or_stopped_only_after_ready(self) -> None:
        if self.m.outcome in (Outcome.DIED, Outcome.STOPPED):
            kinds = [ev.kind for ev in self.events]
            assert "ready" in kinds and kinds.index("ready") < len(kinds) - 1
            assert self.m.verdict() is Verdict.READY

    @invariant()
    def stalled_only_after_the_phase_silence_limit(self) -> None:
        if self.m.outcome is Outcome.STALLED:
            stalled = [ev for ev in self.events if isinstance(ev, StalledEvent)]
            assert len(stalled) == 1 and self.policy.stall_s is not None
            assert self.m.ready is None

    @invariant()
    def timeout_only_after_the_timeout(self) -> None:
        if self.m.outcome is Outcome.TIMEOUT:
            (ev,) = [ev for ev in self.events if isinstance(ev, TimeoutEvent)]
            assert (ev.t or 0.0) >= self.policy.timeout_s

    @invariant()
    def the_events_say_what_was_decided(self) -> None:
        readies = [ev for ev in self.events if isinstance(ev, ReadyEvent)]
        assert len(readies) <= 1
        assert (self.m.ready is not None) == bool(readies)
        states = [ev.state for ev in self.events if isinstance(ev, StateEvent)]
        # starting -> (ready) -> the outcome: each change said once, in that order
        assert states in ([], ["ready"], *[[s] for s in State], *[["ready", s] for s in State]), states
        if states:
            assert states[-1] == self.m.state.value
        if self.m.outcome is not None:
            assert states[-1] == self.m.outcome.value
            if self.m.verdict() is Verdict.READY:
                assert readies and "ready" in states
            else:
                assert not readies
        failed = [ev for ev in self.events if isinstance(ev, FailedEvent) and not ev.runtime]
        assert len(failed) <= 1
        if failed:
            assert self.m.outcome is Outcome.FAILED and self.m.ready is None

    @invariant()
    def the_decision_allows_only_its_own_parts(self) -> None:
        d = self.m.decision()
        assert (d.ready is not None) <= (d.verdict is Verdict.READY)
        assert (d.failure is not None) <= (d.verdict is Verdict.FAILED)
        assert (d.time_to_ready_s is not None) <= (d.verdict is Verdict.READY)


VerdictModel.TestCase.settings = settings(max_examples=300, stateful_step_count=30, deadline=None)
test_verdict_machine_model = VerdictModel.TestCase
