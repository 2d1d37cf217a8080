"""The one place that decides how a watched startup ended.

A pure state machine: it is fed typed signals (what the log says of the launch, output arriving, the server
process or the source dying, probe answers, the verification request, timer ticks, the end of a recorded log)
and decides the outcome: ready, failed, stalled, timed out, incomplete, or (after readiness) stopped or died.
It never does I/O and never reads the clock: every signal carries its time, so a test drives it with made-up
times and a live session with the wall clock, through the same decisions. The root cause itself is the
tracker's (it reads the lines); this machine decides whether there is a failure at all, and it is the only
code that turns evidence into a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from bootwatch.durations import fmt_duration
from bootwatch.vocab.activity import CHECKED, Activity


class Outcome(StrEnum):
    """How a watch ended; `verdict` below says what that means for the startup."""

    READY = "ready"
    FAILED = "failed"
    INCOMPLETE = "incomplete"
    STALLED = "stalled"
    TIMEOUT = "timeout"
    STOPPED = "stopped"  # stopped cleanly after it was ready (run, following)
    DIED = "died"  # died after it was ready
    INTERRUPTED = "interrupted"


class Verdict(StrEnum):
    """The SPEC's verdict: about the startup only."""

    READY = "ready"
    FAILED = "failed"
    INCOMPLETE = "incomplete"
    STALLED = "stalled"
    TIMEOUT = "timeout"


# The SPEC's exit codes (watch, run, replay). Interruptions map to 130/143/129 by signal, elsewhere.
EXIT: dict[str, int] = {
    "ready": 0,
    "stopped": 0,
    "failed": 1,
    "died": 1,
    "usage": 2,
    "incomplete": 3,
    "stalled": 4,
    "timeout": 124,
    "interrupted": 130,
}

# Minutes of silence are normal while weights download, kernels compile and the first batches warm up;
# not while ranks rendezvous.
# While the log is silent and the tree moves, say what moves after this much silence, again every
# ACTIVITY_EVERY_S (or when what moves changes); a sample older than ACTIVITY_FRESH_S says nothing of now.
ACTIVITY_AFTER_S = 5.0
ACTIVITY_EVERY_S = 30.0
ACTIVITY_FRESH_S = 5.0
STALL_FACTOR = {
    "download": 3.0,
    "load_weights": 2.0,
    "load_draft": 2.0,
    "compile": 4.0,
    "cuda_graph": 3.0,
    "warmup": 4.0,
    "kv_cache": 2.0,
    "distributed_init": 1.0,
    "start": 1.0,
    "config": 1.0,
}


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


# ---- signals ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LogSays:
    """What the log says of the launch being judged, after new lines or a settled death."""

    t: float
    ready: bool
    failed: bool
    dying: bool  # a death was seen, its explanation may still be printing
    runtime_failed: bool  # a failure after readiness
    phase: str
    last_line: str = ""


@dataclass(frozen=True)
class Output:
    t: float


@dataclass(frozen=True)
class ProcessExit:
    """The server (or what the source follows: a container) is gone."""

    t: float
    clean: bool  # exit status 0


@dataclass(frozen=True)
class ProbeAnswer:
    t: float
    up: bool


@dataclass(frozen=True)
class VerifyResult:
    t: float
    ok: bool
    latency_s: float
    error: str


@dataclass(frozen=True)
class Tick:
    t: float
    cpu_percent: float | None = None  # the server's tree, when we know it
    activity: Activity | None = None  # what the server's tree does (reads, CPU, compilers), when we know it


@dataclass(frozen=True)
class InputEnd:
    """A recorded log was played to its end (the tracker has finished it)."""

    t: float


Signal = LogSays | Output | ProcessExit | ProbeAnswer | VerifyResult | Tick | InputEnd


# ---- what the machine tells the session --------------------------------------------------------------------
@dataclass(frozen=True)
class Notice:
    """Something to tell the user now: kind is stall | stalled | timeout | ready_by_probe | verify | activity
    (the log is silent but something moves)."""

    kind: str
    t: float
    message: str
    phase: str = ""
    silent_s: float = 0.0
    cpu_percent: float | None = None
    activity: Activity | None = None


@dataclass(frozen=True)
class StallState:
    warn: bool
    stalled: bool
    limit_s: float
    silent_s: float


def stall_state(stall_s: float | None, phase: str, silent_s: float) -> StallState | None:
    """The one stall policy (a single server and a cluster's nodes alike): half the phase's limit warns, the
    whole limit is a stall."""
    if stall_s is None:
        return None
    limit = stall_s * STALL_FACTOR.get(phase, 1.0)
    return StallState(silent_s >= limit / 2, silent_s >= limit, limit, silent_s)


class VerdictMachine:
    def __init__(self, policy: Policy, start: float) -> None:
        self.policy = policy
        self.start = start
        self.outcome: Outcome | None = None
        self.ready_at: float | None = None
        self.log = LogSays(start, ready=False, failed=False, dying=False, runtime_failed=False, phase="start")
        self.last_output = start
        self.probe_up = False
        self.verify: VerifyResult | None = None
        self.verify_pending = False
        self.exited: ProcessExit | None = None
        self.input_ended = False
        self._stall_warned = False
        self._cpu: float | None = None
        self.last_moved = start  # the last sample in which the tree moved (read, computed, compiled)
        self._activity: Activity | None = None
        self._activity_said: tuple[float, str] | None = None  # when, and what kind, last said

    # ---- input -------------------------------------------------------------------------------------------
    def feed(self, signal: Signal) -> list[Notice]:
        if isinstance(signal, LogSays):
            self.log = signal
        elif isinstance(signal, Output):
            self.last_output = max(self.last_output, signal.t)
        elif isinstance(signal, ProcessExit):
            self.exited = signal
        elif isinstance(signal, ProbeAnswer):
            self.probe_up = signal.up
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
        if self.outcome is not None:
            return []
        return self._decide(signal.t)

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

    def _decide(self, now: float) -> list[Notice]:
        if self.exited is not None:
            self._decide_exit()
            return []
        if self.ready_at is None:
            return self._decide_starting(now)
        self._decide_ready()
        return []

    def _decide_exit(self) -> None:
        """The server or the source is gone: before readiness it failed; after, it stopped or died."""
        assert self.exited is not None
        if self.ready_at is not None or self.log.ready:
            clean = self.exited.clean and not self.log.runtime_failed
            self.outcome = Outcome.STOPPED if clean else Outcome.DIED
        else:
            self.outcome = Outcome.FAILED

    def _decide_starting(self, now: float) -> list[Notice]:
        p, log = self.policy, self.log
        if log.failed:
            self.outcome = Outcome.FAILED
            return []
        if self._ready_now():
            return self._became_ready(now)
        if self.input_ended and p.replay:
            self.outcome = Outcome.INCOMPLETE
            return []
        if now - self.start >= p.timeout_s:
            self.outcome = Outcome.TIMEOUT
            return [
                Notice("timeout", now, f"not ready after {fmt_duration(now - self.start)} (in {log.phase})", log.phase)
            ]
        return self._stall(now)

    def _became_ready(self, now: float) -> list[Notice]:
        self.ready_at = now
        out = [] if self.log.ready else [Notice("ready_by_probe", now, "the URL answered 200")]
        if self.policy.verify:
            self.verify_pending = True
            return [*out, Notice("verify", now, "asking for one token")]
        if not self.policy.follow_after_ready:
            self.outcome = Outcome.READY
        return out

    def _decide_ready(self) -> None:
        """After readiness: the verification's answer, then (following) a runtime death of a server we do not
        hold the process of."""
        if self.verify_pending:
            return
        if self.verify is not None:
            if not self.verify.ok:
                self.outcome = Outcome.FAILED
            elif not self.policy.follow_after_ready:
                self.outcome = Outcome.READY
            if self.outcome is not None:
                return
        if self.log.runtime_failed and not self.policy.has_server:
            self.outcome = Outcome.DIED

    @property
    def quiet_since(self) -> float:
        """Since when nothing has moved: no output, and (when the tree is watched) no reads, CPU or compiler."""
        return max(self.last_output, self.last_moved)

    def _say_activity(self, now: float) -> list[Notice]:
        """The log is silent but the tree moves: say what, when it starts and then every so often (or when
        what moves changes: reading, then compiling)."""
        a, silent = self._activity, now - self.last_output
        if silent < ACTIVITY_AFTER_S:
            self._activity_said = None
        if a is None or silent < ACTIVITY_AFTER_S or not a.moved(self.log.phase) or now - a.t > ACTIVITY_FRESH_S:
            return []
        said = self._activity_said
        if said is not None and said[1] == a.kind and now - said[0] < ACTIVITY_EVERY_S:
            return []
        self._activity_said = (now, a.kind)
        msg = f"no output for {fmt_duration(silent)} in {self.log.phase}, but it moves: {a.describe()}"
        return [Notice("activity", now, msg, self.log.phase, round(silent, 1), activity=a)]

    def _stall(self, now: float) -> list[Notice]:
        phase = self.log.phase
        out = self._say_activity(now)
        st = stall_state(self.policy.stall_s, phase, now - self.quiet_since)
        if st is None or not st.warn:
            self._stall_warned = False
            return out
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
            out.append(Notice("stall", now, msg, phase, round(st.silent_s, 1), cpu))
        if st.stalled:
            self.outcome = Outcome.STALLED
            out.append(Notice("stalled", now, msg, phase, round(st.silent_s, 1), cpu))
        return out

    # ---- output ------------------------------------------------------------------------------------------
    @property
    def verify_failed(self) -> bool:
        return self.verify is not None and not self.verify.ok

    def verdict(self, outcome: Outcome | None = None) -> Verdict:
        """The startup's verdict once the watch ended with `outcome` (default: the machine's own)."""
        outcome = outcome or self.outcome
        if self.verify_failed:
            return Verdict.FAILED  # the log said ready but the model did not generate
        if outcome in (Outcome.READY, Outcome.STOPPED, Outcome.DIED) and (self.ready_at is not None or self.log.ready):
            return Verdict.READY
        if outcome is Outcome.DIED or outcome is Outcome.FAILED:
            return Verdict.FAILED
        if outcome in (Outcome.STALLED, Outcome.TIMEOUT, Outcome.INCOMPLETE):
            return Verdict(outcome.value)
        # Interrupted, or asked before the end: what is known so far.
        if self.log.failed:
            return Verdict.FAILED
        if self.ready_at is not None or self.log.ready:
            return Verdict.READY
        return Verdict.INCOMPLETE


def log_verdict(log: LogSays) -> Verdict:
    """A log read to its end with nothing else to go by (report, replay): ready or failed as it says, else
    incomplete (never a guess)."""
    m = VerdictMachine(Policy(timeout_s=float("inf"), stall_s=None, replay=True), log.t)
    m.feed(log)
    m.feed(InputEnd(log.t))
    return m.verdict()


def cluster_outcome(outcomes: list[Outcome | None], each: bool) -> Outcome | None:
    """Several sources. One server over several nodes: any node failing fails it, and it is ready when the
    first node (the one serving HTTP) is. --each: every source is its own server, decided when all are."""
    if each:
        return combine(outcomes) if all(o is not None for o in outcomes) else None
    if any(o in (Outcome.FAILED, Outcome.DIED) for o in outcomes):
        return Outcome.FAILED
    if outcomes and outcomes[0] is Outcome.READY:
        return Outcome.READY
    return None


def cluster_verdict(outcome: Outcome, nodes: list[Verdict]) -> Verdict:
    """The verdict of several sources watched together, from how the watch ended and each node's own."""
    if outcome in (Outcome.READY, Outcome.STOPPED):
        return Verdict.READY
    if outcome in (Outcome.FAILED, Outcome.DIED):
        return Verdict.FAILED
    if outcome is Outcome.INTERRUPTED:
        if Verdict.FAILED in nodes:
            return Verdict.FAILED
        return Verdict.READY if nodes and nodes[0] is Verdict.READY else Verdict.INCOMPLETE
    return Verdict(outcome.value)


def combine(outcomes: list[Outcome | None]) -> Outcome:
    """--each: ready only if all are; else the most serious outcome (a failure before a stall or a timeout)."""
    for kind in (Outcome.FAILED, Outcome.DIED, Outcome.STALLED, Outcome.TIMEOUT, Outcome.INCOMPLETE):
        if kind in outcomes:
            return Outcome.FAILED if kind is Outcome.DIED else kind
    if None in outcomes:
        return Outcome.INCOMPLETE
    return Outcome.READY
