from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The SPEC's event kinds, plus "launch" (a new launch began in the same log) and "line" (the last
# meaningful line, for live views).
KINDS = (
    "launch",
    "phase",
    "progress",
    "fact",
    "warning",
    "stall",
    "ready",
    "failed",
    "timeout",
    "stalled",
    "line",
    "serving",
)


@dataclass(slots=True)
class Event:
    kind: str
    t: float | None  # the log's time (or arrival time when live)
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self, now: float) -> dict[str, Any]:
        return {"t": round(now, 3), "event": self.kind, **self.data}
