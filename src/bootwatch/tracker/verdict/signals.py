"""What the verdict machine is fed: typed signals, each with its time (the machine never reads a clock)."""

from __future__ import annotations

from dataclasses import dataclass

from bootwatch.tracker.parts import Failure, Ready
from bootwatch.vocab.activity import Activity


@dataclass(frozen=True)
class LogSays:
    """What the log says of the launch being judged, after new lines or a settled death. The parts (`ready_line`,
    `failure`, `runtime_failure`) are the tracker's findings; the machine decides what they mean."""

    t: float
    ready: bool
    failed: bool
    dying: bool  # a death was seen, its explanation may still be printing
    runtime_failed: bool  # a failure after readiness
    phase: str
    last_line: str = ""
    ready_line: Ready | None = None
    failure: Failure | None = None
    runtime_failure: Failure | None = None
    ready_t: float | None = None  # the ready line's time (the log's clock, or its arrival)
    start_t: float | None = None  # the launch's start on the same clock
    # A watch read the launch's past at once: arrival times say nothing of how long it took, only the log's own
    # timestamps do (`caught_up_span`: from the launch's start to its ready line by them, None without them).
    caught_up: bool = False
    caught_up_span: float | None = None

    @classmethod
    def nothing(cls, t: float) -> LogSays:
        """No launch (yet), or one that is not judged."""
        return cls(t, ready=False, failed=False, dying=False, runtime_failed=False, phase="start")


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
    url: str = ""  # what answered (said in the ready event when the probe, not the log, made it ready)


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

__all__ = ["InputEnd", "LogSays", "Output", "ProbeAnswer", "ProcessExit", "Signal", "Tick", "VerifyResult"]
