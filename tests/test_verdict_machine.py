"""The verdict machine decides every outcome from typed signals with made-up times: no processes, no clock."""

from __future__ import annotations

from bootwatch.tracker.events import Event, NodeStallEvent, StateEvent, TimeoutEvent
from bootwatch.tracker.verdict import (
    ClusterMachine,
    InputEnd,
    LogSays,
    NodeSays,
    Outcome,
    Output,
    Policy,
    ProbeAnswer,
    ProcessExit,
    Tick,
    Verdict,
    VerdictMachine,
    VerifyResult,
    cluster_outcome,
    combine,
    log_verdict,
)


def kinds(events: list[Event]) -> list[str]:
    return [e.kind if not isinstance(e, StateEvent) else f"state:{e.state}" for e in events]


def says(t: float, **kw: object) -> LogSays:
    base = {"ready": False, "failed": False, "dying": False, "runtime_failed": False, "phase": "load_weights"}
    return LogSays(t, **{**base, **kw})  # type: ignore[arg-type]


def test_ready_from_the_log() -> None:
    m = VerdictMachine(Policy(), 0.0)
    m.feed(says(1.0))
    assert m.outcome is None
    m.feed(says(2.0, ready=True))
    assert m.outcome is Outcome.READY and m.verdict() is Verdict.READY


def test_a_url_the_user_gave_must_answer_before_ready() -> None:
    m = VerdictMachine(Policy(has_probe=True), 0.0)
    m.feed(says(1.0, ready=True))
    assert m.outcome is None
    events = m.feed(ProbeAnswer(2.0, up=True))
    # The readiness is said when the machine takes it (the URL answered), not when the log said it.
    assert m.outcome is Outcome.READY and kinds(events) == ["ready", "state:ready"]


def test_a_guessed_url_answering_is_readiness_the_log_never_printed() -> None:
    m = VerdictMachine(Policy(has_probe=True, probe_required=False), 0.0)
    events = m.feed(ProbeAnswer(2.0, up=True, url="http://h:1"))
    assert m.outcome is Outcome.READY and kinds(events) == ["ready", "state:ready"]
    assert m.ready is not None and m.ready.text == "http://h:1 answered 200"


def test_a_dying_log_is_never_ready() -> None:
    m = VerdictMachine(Policy(has_probe=True, probe_required=False), 0.0)
    m.feed(says(1.0, dying=True))
    m.feed(ProbeAnswer(2.0, up=True))
    assert m.outcome is None


def test_silence_warns_at_half_the_limit_then_stalls_scaled_by_phase() -> None:
    m = VerdictMachine(Policy(stall_s=10.0), 0.0)
    m.feed(says(0.0, phase="distributed_init"))
    assert kinds(m.feed(Tick(4.0))) == []
    assert kinds(m.feed(Tick(5.0, cpu_percent=0.0))) == ["stall"]
    assert kinds(m.feed(Tick(10.0))) == ["stalled", "state:stalled"]
    assert m.outcome is Outcome.STALLED and m.verdict() is Verdict.STALLED


def test_output_resets_the_silence_and_compile_gets_longer() -> None:
    m = VerdictMachine(Policy(stall_s=10.0), 0.0)
    m.feed(says(0.0, phase="compile"))  # 4x: 40 s
    m.feed(Output(30.0))
    assert m.feed(Tick(45.0)) == []
    assert kinds(m.feed(Tick(51.0))) == ["stall"]
    assert m.outcome is None


def test_timeout_names_the_phase() -> None:
    m = VerdictMachine(Policy(timeout_s=60.0, stall_s=None), 0.0)
    events = m.feed(Tick(61.0))
    assert m.outcome is Outcome.TIMEOUT and isinstance(events[0], TimeoutEvent)
    assert "load_weights" not in events[0].message
    m2 = VerdictMachine(Policy(timeout_s=60.0, stall_s=None), 0.0)
    m2.feed(says(1.0))
    first = m2.feed(Tick(61.0))[0]
    assert isinstance(first, TimeoutEvent) and "load_weights" in first.message


def test_exit_before_ready_fails_after_ready_clean_stop_or_death() -> None:
    m = VerdictMachine(Policy(has_server=True), 0.0)
    m.feed(ProcessExit(1.0, clean=True))
    assert m.outcome is Outcome.FAILED and m.verdict() is Verdict.FAILED
    for clean, runtime_failed, want in (
        (True, False, Outcome.STOPPED),
        (False, False, Outcome.DIED),
        (True, True, Outcome.DIED),
    ):
        m = VerdictMachine(Policy(has_server=True, follow_after_ready=True), 0.0)
        m.feed(says(1.0, ready=True))
        assert m.outcome is None  # following
        m.feed(says(2.0, ready=True, runtime_failed=runtime_failed))
        m.feed(ProcessExit(3.0, clean=clean))
        assert m.outcome is want and m.verdict() is Verdict.READY


def test_verification_decides_after_the_log_said_ready() -> None:
    m = VerdictMachine(Policy(verify=True), 0.0)
    events = m.feed(says(1.0, ready=True))
    # Nothing is said before the answer: a readiness the model then disproves was never readiness.
    assert events == [] and m.verify_pending and m.outcome is None
    events = m.feed(VerifyResult(2.0, ok=False, latency_s=0.1, error="HTTP 500"))
    assert m.outcome is Outcome.FAILED and m.verdict() is Verdict.FAILED
    assert kinds(events) == ["failed", "state:failed"]
    assert m.decision().failure is not None and m.decision().failure.category == "warmup"
    m = VerdictMachine(Policy(verify=True), 0.0)
    m.feed(says(1.0, ready=True))
    assert kinds(m.feed(VerifyResult(2.0, ok=True, latency_s=0.1, error=""))) == ["ready", "state:ready"]
    assert m.outcome is Outcome.READY


def test_a_startup_that_fails_while_its_token_is_asked_for_was_never_ready() -> None:
    """Found by tests/test_verdict_model.py: the probe answered, the token was asked for, then the log failed
    the startup (a compile crash); a late "ok" must not make it ready."""
    m = VerdictMachine(Policy(verify=True), 0.0)
    m.feed(ProbeAnswer(0.0, up=True))
    assert m.verify_pending and m.outcome is None
    events = m.feed(says(1.0, failed=True, phase="compile"))
    assert m.outcome is Outcome.FAILED and kinds(events)[-1] == "state:failed"
    assert "ready" not in kinds(m.feed(VerifyResult(2.0, ok=True, latency_s=0.1, error="")))
    assert m.outcome is Outcome.FAILED


def test_a_recorded_log_that_just_stops_is_incomplete_never_a_guess() -> None:
    m = VerdictMachine(Policy(replay=True, stall_s=None), 0.0)
    m.feed(says(5.0))
    m.feed(InputEnd(5.0))
    assert m.outcome is Outcome.INCOMPLETE
    assert log_verdict(says(1.0, ready=True)) is Verdict.READY
    assert log_verdict(says(1.0, failed=True)) is Verdict.FAILED
    assert log_verdict(says(1.0, dying=True)) is Verdict.INCOMPLETE


def test_interrupted_reports_what_is_known() -> None:
    m = VerdictMachine(Policy(), 0.0)
    m.feed(says(1.0))
    assert m.verdict(Outcome.INTERRUPTED) is Verdict.INCOMPLETE


def test_several_sources() -> None:
    assert cluster_outcome([None, Outcome.FAILED], each=False) is Outcome.FAILED
    assert cluster_outcome([Outcome.READY, None], each=False) is Outcome.READY
    assert cluster_outcome([None, Outcome.READY], each=False) is None
    assert cluster_outcome([Outcome.READY, None], each=True) is None
    assert combine([Outcome.READY, Outcome.STALLED, Outcome.TIMEOUT]) is Outcome.STALLED
    assert combine([Outcome.READY, Outcome.DIED]) is Outcome.FAILED
    assert combine([Outcome.READY, Outcome.READY]) is Outcome.READY


def test_the_cluster_machine_decides_a_silent_node_stalls_the_whole() -> None:
    m = ClusterMachine(stall_s=10.0, timeout_s=3600.0, start=0.0)
    nodes = lambda t, quiet2: [  # noqa: E731
        NodeSays("node1", "load_weights", t, None),
        NodeSays("node2", "distributed_init", quiet2, None),
    ]
    assert m.feed(4.0, nodes(4.0, 0.0)) == []
    warned = m.feed(5.0, nodes(5.0, 0.0))
    assert kinds(warned) == ["stall"] and warned[0].node == "node2"
    assert isinstance(warned[0], NodeStallEvent) and "node1 at load_weights" in warned[0].message
    ended = m.feed(10.0, nodes(10.0, 0.0))
    assert kinds(ended) == ["stalled", "state:stalled"] and m.outcome is Outcome.STALLED
    assert m.feed(11.0, nodes(11.0, 0.0)) == []  # decided: final


def test_the_cluster_machine_times_out_naming_the_late_nodes_and_names_a_failed_node() -> None:
    m = ClusterMachine(stall_s=None, timeout_s=60.0, start=0.0)
    events = m.feed(61.0, [NodeSays("node1", "ready", 61.0, Outcome.READY), NodeSays("node2", "warmup", 61.0, None)])
    assert kinds(events) == ["state:ready"] and m.outcome is Outcome.READY  # the first node serves: ready
    m = ClusterMachine(stall_s=None, timeout_s=60.0, start=0.0)
    events = m.feed(61.0, [NodeSays("node1", "compile", 61.0, None), NodeSays("node2", "warmup", 61.0, None)])
    assert kinds(events) == ["timeout", "state:timeout"]
    assert isinstance(events[0], TimeoutEvent) and "node1 in compile, node2 in warmup" in events[0].message
    m = ClusterMachine(stall_s=None, timeout_s=60.0, start=0.0)
    m.feed(5.0, [NodeSays("node1", "compile", 5.0, None), NodeSays("node2", "warmup", 5.0, Outcome.FAILED)])
    assert m.outcome is Outcome.FAILED and m.failed_node == "node2"
    each = ClusterMachine(stall_s=None, timeout_s=60.0, start=0.0, each=True)
    assert each.feed(5.0, [NodeSays("a", "ready", 5.0, Outcome.READY), NodeSays("b", "warmup", 5.0, None)]) == []
    each.feed(6.0, [NodeSays("a", "ready", 6.0, Outcome.READY), NodeSays("b", "warmup", 6.0, Outcome.STALLED)])
    assert each.outcome is Outcome.STALLED and each.failed_node is None
