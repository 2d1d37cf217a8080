"""The summary of one startup: the SPEC's JSON object, made in one place from typed parts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bootwatch.tracker.verdict import Verdict


@dataclass
class Summary:
    verdict: Verdict
    engine: str
    engine_version: str | None
    ready: dict[str, Any] | None
    failure: dict[str, Any] | None
    phases: list[dict[str, Any]]
    facts: dict[str, Any]
    warnings: list[dict[str, Any]]
    runtime_failure: dict[str, Any] | None = None
    # Beyond the SPEC's required keys: launches, exit, line counts, health, verify, elapsed_s, nodes, ...
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The SPEC's invariants hold here whatever the parts said: `ready` only for a ready startup,
        `failure` only for a failed one."""
        return {
            "verdict": self.verdict.value,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "ready": self.ready if self.verdict is Verdict.READY else None,
            "failure": self.failure if self.verdict is Verdict.FAILED else None,
            "phases": self.phases,
            "facts": self.facts,
            "warnings": self.warnings,
            "runtime_failure": self.runtime_failure if self.verdict is Verdict.READY else None,
            **self.extra,
        }
