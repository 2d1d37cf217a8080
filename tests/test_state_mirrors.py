"""The live view, the probe's state file and the metrics mirror the verdict machine's decisions: they show the
state it said, when it said it, and a time to ready only for a startup it called ready. The machine is driven
with made-up times; its events go to each sink as a session sends them."""

from __future__ import annotations

import math
from pathlib import Path

from prometheus_client import CollectorRegistry

from bootwatch.pipeline import Analyzer  # first: it imports the tracker before the sinks import serving/
from bootwatch.probe_state import StateSink, read
from bootwatch.sinks.live_view import ServerView
from bootwatch.sinks.metrics import MetricsSink
from bootwatch.tracker.events import Event
from bootwatch.tracker.parts import Failure, Ready
from bootwatch.tracker.verdict import LogSays, Policy, ProcessExit, VerdictMachine, VerifyResult
from bootwatch.tracker.verdict.signals import Signal


def says(t: float, ready: bool = False, runtime: bool = False) -> LogSays:
    return LogSays(
        t,
        ready=ready,
        failed=False,
        dying=False,
        runtime_failed=runtime,
        phase="ready" if ready else "load_weights",
        ready_line=Ready(40, "Application startup complete.") if ready else None,
        runtime_failure=Failure(90, "RuntimeError: CUDA error", "cuda") if runtime else None,
        ready_t=31.5 if ready else None,
        start_t=1.5,
    )


class Mirrors:
    def __init__(self, tmp_path: Path, policy: Policy) -> None:
        self.machine = VerdictMachine(policy, 0.0)
        self.registry = CollectorRegistry()
        self.metrics = MetricsSink(registry=self.registry)
        self.state = StateSink(tmp_path / "state.json", "s.log", heartbeat_s=60)
        self.path = tmp_path / "state.json"
        self.view = ServerView()
        self.events: list[Event] = []

    def feed(self, signal: Signal) -> None:
        for ev in self.machine.feed(signal):
            self.events.append(ev)
            for sink in (self.metrics, self.state):
                sink.event(ev, signal.t)
            self.view.apply(ev, signal.t)

    def close(self) -> dict[str, object]:
        summary = Analyzer().summary(self.machine.decision()).to_json()
        self.metrics.close(summary, 100.0)
        self.state.close(summary, 100.0)
        return summary

    def metric_state(self) -> str:
        return next(
            s
            for s in ("starting", "ready", "failed", "stalled", "timeout", "incomplete", "died", "stopped")
            if self.registry.get_sample_value("bootwatch_startup_state", {"bootwatch_startup_state": s}) == 1.0
        )

    def to_ready(self) -> float:
        value = self.registry.get_sample_value("bootwatch_startup_time_to_ready_seconds")
        assert value is not None
        return value

    def all_say(self) -> set[str]:
        return {self.view.state(), read(self.path).state, self.metric_state()}


def test_a_ready_line_the_model_then_disproves_is_failed_everywhere_with_no_time_to_ready(tmp_path: Path) -> None:
    m = Mirrors(tmp_path, Policy(verify=True))
    m.feed(says(32.0, ready=True))
    assert m.all_say() == {"starting"}  # not ready until the model generates
    m.feed(VerifyResult(33.0, ok=False, latency_s=0.2, error="HTTP 500 from /v1/completions"))
    summary = m.close()
    assert summary["verdict"] == "failed" and summary["outcome"] == "failed"
    assert summary["time_to_ready_s"] is None and summary["ready"] is None
    assert m.all_say() == {"failed"}
    assert math.isnan(m.to_ready())
    assert [ev.kind for ev in m.events] == ["failed", "state"]


def test_ready_then_a_death_after_it_is_died_everywhere_once_the_machine_says_so(tmp_path: Path) -> None:
    m = Mirrors(tmp_path, Policy(follow_after_ready=True, has_server=True))
    m.feed(says(32.0, ready=True))
    assert m.all_say() == {"ready"}
    assert m.to_ready() == 30.0  # the machine's figure: the ready line's time minus the launch's, on the log's clock
    m.feed(says(40.0, ready=True, runtime=True))
    # The log explained a death, the process still runs: said as a failure after ready, not yet an outcome.
    assert m.all_say() == {"ready"} and m.view.failed_runtime
    m.feed(ProcessExit(41.0, clean=False))
    summary = m.close()
    assert summary["verdict"] == "ready" and summary["outcome"] == "died"
    assert summary["time_to_ready_s"] == 30.0
    assert m.all_say() == {"died"}
    assert m.to_ready() == 30.0
