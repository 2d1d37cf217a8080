"""The verdict package: the one place that decides how a watched startup ended.

- `outcomes`: the vocabulary (`Outcome` of a watch, `Verdict` of a startup, `State` a watch is in, exit codes);
- `signals`: what the machine is fed (typed, timed);
- `stall`: the stall policy (a phase's silence limit);
- `machine`: `VerdictMachine`, one server: its decisions are events (`state`, `ready`, `failed`, ...) and the
  summary's `outcome`, `ready`, `failure` and `time_to_ready_s`;
- `cluster`: `ClusterMachine`, several sources fed per-node signals: the cluster's stall, timeout and outcome.
"""

from bootwatch.tracker.verdict.cluster import (
    ClusterMachine,
    NodeSays,
    cluster_outcome,
    cluster_state,
    cluster_verdict,
    combine,
)
from bootwatch.tracker.verdict.machine import (
    Decision,
    Policy,
    VerdictMachine,
    failed_event,
    log_decision,
    log_verdict,
)
from bootwatch.tracker.verdict.outcomes import EXIT, FINAL, Outcome, State, Verdict
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
from bootwatch.tracker.verdict.stall import (
    ACTIVITY_AFTER_S,
    ACTIVITY_EVERY_S,
    ACTIVITY_FRESH_S,
    STALL_FACTOR,
    StallState,
    stall_limit,
    stall_state,
)

__all__ = [
    "ACTIVITY_AFTER_S",
    "ACTIVITY_EVERY_S",
    "ACTIVITY_FRESH_S",
    "EXIT",
    "FINAL",
    "STALL_FACTOR",
    "ClusterMachine",
    "Decision",
    "InputEnd",
    "LogSays",
    "NodeSays",
    "Outcome",
    "Output",
    "Policy",
    "ProbeAnswer",
    "ProcessExit",
    "Signal",
    "StallState",
    "State",
    "Tick",
    "Verdict",
    "VerdictMachine",
    "VerifyResult",
    "cluster_outcome",
    "cluster_state",
    "cluster_verdict",
    "combine",
    "failed_event",
    "log_decision",
    "log_verdict",
    "stall_limit",
    "stall_state",
]
