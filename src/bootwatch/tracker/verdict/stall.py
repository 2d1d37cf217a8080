"""The one stall policy, for a single server and a cluster's nodes alike."""

from __future__ import annotations

from dataclasses import dataclass

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
class StallState:
    warn: bool
    stalled: bool
    limit_s: float
    silent_s: float


def stall_limit(stall_s: float, phase: str) -> float:
    return stall_s * STALL_FACTOR.get(phase, 1.0)


def stall_state(stall_s: float | None, phase: str, silent_s: float) -> StallState | None:
    """Half the phase's limit warns, the whole limit is a stall."""
    if stall_s is None:
        return None
    limit = stall_limit(stall_s, phase)
    return StallState(silent_s >= limit / 2, silent_s >= limit, limit, silent_s)


__all__ = [
    "ACTIVITY_AFTER_S",
    "ACTIVITY_EVERY_S",
    "ACTIVITY_FRESH_S",
    "STALL_FACTOR",
    "StallState",
    "stall_limit",
    "stall_state",
]
