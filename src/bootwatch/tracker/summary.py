"""The summary of one startup, built once: the tracker's facts about the launch and the verdict machine's
decision (typed parts), plus what a live watch saw beside the log. The SPEC's JSON object is made from it at
the edge (`to_json`), and only there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bootwatch.tracker.parts import Failure, Ready
from bootwatch.tracker.verdict import Decision, State, Verdict


@dataclass(frozen=True)
class Checked:
    """A verification: one generated token asked of the server once it said ready."""

    ok: bool
    latency_s: float
    error: str | None

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "latency_s": round(self.latency_s, 3), "error": self.error or None}


@dataclass(frozen=True)
class LiveFacts:
    """What a live watch adds to the log's story: the probe's last answer, how long it watched, the
    verification, and why there is nothing to judge (a file whose last launch had already ended)."""

    health: str | None
    elapsed_s: float
    verify: Checked | None = None
    note: str | None = None


@dataclass
class Summary:
    verdict: Verdict
    engine: str
    engine_version: str | None
    ready: Ready | None
    failure: Failure | None
    phases: list[dict[str, Any]]
    facts: dict[str, Any]
    warnings: list[dict[str, Any]]
    outcome: State = State.STARTING
    time_to_ready_s: float | None = None
    runtime_failure: Failure | None = None
    live: LiveFacts | None = None
    node: str | None = None  # a cluster's node this summary is of
    # What the tracker and the pipeline describe beyond the SPEC's keys: engine_display, engine_evidence,
    # launches, exit, launch_start_line, last_line_no, serving, lines, truncated_lines, skipped_bytes; a
    # cluster's nodes or servers.
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "verdict": self.verdict.value,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "ready": None if self.ready is None else self.ready.to_json(),
            "failure": None if self.failure is None else self.failure.to_json(),
            "phases": self.phases,
            "facts": self.facts,
            "warnings": self.warnings,
            "outcome": self.outcome.value,
            "time_to_ready_s": self.time_to_ready_s,
            "runtime_failure": None if self.runtime_failure is None else self.runtime_failure.to_json(),
            **self.details,
        }
        live = self.live
        if live is not None:
            if live.note is not None:
                out["note"] = live.note
            out["health"] = live.health
            out["elapsed_s"] = live.elapsed_s
            if live.verify is not None:
                out["verify"] = live.verify.to_json()
        if self.node is not None:
            out["node"] = self.node
        return out


def summarize(
    decision: Decision,
    engine: str,
    engine_version: str | None,
    phases: list[dict[str, Any]],
    facts: dict[str, Any],
    warnings: list[dict[str, Any]],
    details: dict[str, Any],
    live: LiveFacts | None = None,
) -> Summary:
    """The one constructor: the machine's decision says what the parts are (`ready` only for a ready
    startup, `failure` only for a failed one), the tracker what the launch looked like."""
    return Summary(
        verdict=decision.verdict,
        engine=engine,
        engine_version=engine_version,
        ready=decision.ready,
        failure=decision.failure,
        phases=phases,
        facts=facts,
        warnings=warnings,
        outcome=decision.state,
        time_to_ready_s=decision.time_to_ready_s,
        runtime_failure=decision.runtime_failure,
        live=live,
        details=details,
    )


__all__ = ["Checked", "LiveFacts", "Summary", "summarize"]
