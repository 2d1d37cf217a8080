"""The verdict machine's vocabulary: how a watch ended, what that means for the startup, and the state a
watch is in (the summary's `outcome`, the `state` events, what the live view, the probe's state file and
the metrics show)."""

from __future__ import annotations

from enum import StrEnum


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


class State(StrEnum):
    """Where the watched server stands, as the machine decided it: the summary's `outcome` and the `state`
    events. An interrupted watch keeps the state it had (starting, or ready while following)."""

    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    STALLED = "stalled"
    TIMEOUT = "timeout"
    INCOMPLETE = "incomplete"
    DIED = "died"
    STOPPED = "stopped"


FINAL: frozenset[State] = frozenset(State) - {State.STARTING, State.READY}

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

__all__ = ["EXIT", "FINAL", "Outcome", "State", "Verdict"]
