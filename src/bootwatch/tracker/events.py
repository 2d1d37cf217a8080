"""Typed events: one dataclass per kind. Producers build them with typed fields; sinks read the fields (or
match on the class); `to_json` writes the SPEC's JSON line, `{"t": ..., "event": kind, ...}`.

The JSON keys are the fields' names, in field order, with `node` first when it is set. A few rules, declared
on the fields, keep each kind's JSON exactly as it has always been:
- `opt()`: the key is left out when the value is None (a key only some producers write);
- `opt(along="other")`: the key is written whenever `other` is, even when None (keys that come as a group);
- `field(metadata={"json": "name"})`: written under another name (a warning's own `kind`);
- `flat()`: an open-ended dict whose keys are written in its place (a warning's evidence, an activity sample).
"""

from __future__ import annotations

from dataclasses import Field, dataclass, field, fields
from typing import Any, ClassVar


def opt(along: str | None = None) -> Any:
    """An optional field: None by default, and its key is left out of the JSON while None; with `along`,
    written (even as null) exactly when the field of that name is."""
    meta: dict[str, Any] = {"omit_none": True} if along is None else {"along": along}
    return field(default=None, metadata=meta)


def flat() -> Any:
    """An open-ended payload: its keys go into the JSON in its place (the field's own name does not)."""
    return field(default_factory=dict, metadata={"flatten": True})


# Per class: (field, JSON key) of the fields that make the payload, in order (`t` and `node` aside).
_LAYOUT: dict[type, tuple[tuple[Field[Any], str], ...]] = {}


def _layout(cls: type) -> tuple[tuple[Field[Any], str], ...]:
    lay = _LAYOUT.get(cls)
    if lay is None:
        lay = _LAYOUT[cls] = tuple(
            (f, f.metadata.get("json", f.name)) for f in fields(cls) if f.name not in ("t", "node")
        )
    return lay


@dataclass(slots=True, kw_only=True)
class Event:
    """What every event has: its kind (per class), its time and, in a cluster, the node that said it."""

    kind: ClassVar[str] = ""
    t: float | None  # the log's time (or arrival time when live)
    node: str | None = None  # the cluster node that said it (set by cluster.NodeSink)

    def payload(self) -> dict[str, Any]:
        """The JSON fields other than `t` and `event`."""
        out: dict[str, Any] = {} if self.node is None else {"node": self.node}
        for f, key in _layout(type(self)):
            value = getattr(self, f.name)
            meta = f.metadata
            if meta.get("flatten"):
                out.update(value)
                continue
            along = meta.get("along")
            if along is not None:
                if along not in out:
                    continue
            elif value is None and meta.get("omit_none"):
                continue
            out[key] = value
        return out

    def to_json(self, now: float) -> dict[str, Any]:
        return {"t": round(now, 3), "event": self.kind, **self.payload()}


@dataclass(slots=True, kw_only=True)
class LaunchEvent(Event):
    """A new launch began in the same log."""

    kind: ClassVar[str] = "launch"
    line_no: int
    launch: int  # how many launches so far, this one included


@dataclass(slots=True, kw_only=True)
class PhaseEvent(Event):
    kind: ClassVar[str] = "phase"
    name: str
    line_no: int | None
    draft: bool
    text: str  # the line that began it ("" in a catch-up snapshot)


@dataclass(slots=True, kw_only=True)
class ProgressEvent(Event):
    kind: ClassVar[str] = "progress"
    phase: str
    n: int | None = opt()  # counted steps (a "done" line has none)
    total: int | None = opt()
    progress: float | None
    line_no: int | None


@dataclass(slots=True, kw_only=True)
class ProgressSoFarEvent(ProgressEvent):
    """Where the current phase stands, in a catch-up snapshot: `n` and `total` are always written (null for a
    phase without counts)."""

    n: int | None = None
    total: int | None = None


@dataclass(slots=True, kw_only=True)
class FactEvent(Event):
    """A fact from the log (with its line), the health probe's answer (`url`), or the verify request (`ok`,
    `error`)."""

    kind: ClassVar[str] = "fact"
    name: str
    value: Any
    line_no: int | None = opt()
    url: str | None = opt()
    ok: bool | None = opt()
    error: str | None = opt(along="ok")


@dataclass(slots=True, kw_only=True)
class WarningEvent(Event):
    """A warning; its own kind (e.g. "slow_phase") is `warning` here and "kind" in the JSON. `details` holds
    what some warnings add (a serving finding's `evidence` and `fix`, a slow phase's `took_s`...)."""

    kind: ClassVar[str] = "warning"
    line_no: int | None
    warning: str = field(metadata={"json": "kind"})
    text: str
    details: dict[str, Any] = flat()

    @classmethod
    def of(cls, t: float | None, w: dict[str, Any]) -> WarningEvent:
        """From a warning as the summary keeps it ({"line_no", "kind", "text", ...})."""
        rest = {k: v for k, v in w.items() if k not in ("line_no", "kind", "text")}
        return cls(t=t, line_no=w.get("line_no"), warning=str(w["kind"]), text=str(w["text"]), details=rest)


@dataclass(slots=True, kw_only=True)
class StallEvent(Event):
    """No output for a while (a warning; `stalled` is the verdict)."""

    kind: ClassVar[str] = "stall"
    phase: str
    silent_s: float
    message: str
    cpu_percent: float | None = None  # the server's tree, when measured


@dataclass(slots=True, kw_only=True)
class NodeStallEvent(StallEvent):
    """A cluster's node silent while the others move on (`node` names it): no CPU reading."""

    cpu_percent: float | None = opt()


@dataclass(slots=True, kw_only=True)
class ActivityEvent(Event):
    """The log is silent but something moves; `details` is the sample (`Activity.to_json()`)."""

    kind: ClassVar[str] = "activity"
    phase: str
    silent_s: float
    message: str
    details: dict[str, Any] = flat()

    @property
    def eta_s(self) -> float | None:
        """The rest of the weights at the recent rate, when known."""
        eta = self.details.get("eta_s")
        return float(eta) if isinstance(eta, int | float) and not isinstance(eta, bool) else None


@dataclass(slots=True, kw_only=True)
class ReadyEvent(Event):
    kind: ClassVar[str] = "ready"
    line_no: int | None  # None when the probe, not the log, said so
    text: str


@dataclass(slots=True, kw_only=True)
class FailedEvent(Event):
    """The root cause (the shape of the summary's `failure`), and whether it came after readiness."""

    kind: ClassVar[str] = "failed"
    line_no: int | None
    text: str
    category: str
    context: list[str] | None = opt()
    detail: str | None = opt()
    chain: list[str] | None = opt()
    procs: list[str] | None = opt()
    runtime: bool


@dataclass(slots=True, kw_only=True)
class TimeoutEvent(Event):
    kind: ClassVar[str] = "timeout"
    message: str


@dataclass(slots=True, kw_only=True)
class StalledEvent(Event):
    kind: ClassVar[str] = "stalled"
    phase: str
    message: str


@dataclass(slots=True, kw_only=True)
class StateEvent(Event):
    """The verdict machine's state changed: `ready` once it accepted readiness, then how the watch ended
    (failed, stalled, timeout, incomplete, died, stopped). Only the machine emits it; every surface mirrors it."""

    kind: ClassVar[str] = "state"
    state: str
    phase: str
    time_to_ready_s: float | None = opt()


@dataclass(slots=True, kw_only=True)
class LineEvent(Event):
    """The last meaningful line, for live views only (never in the JSON stream)."""

    kind: ClassVar[str] = "line"
    text: str
    line_no: int | None = opt()


@dataclass(slots=True, kw_only=True)
class ServingEvent(Event):
    """One serving reading after ready: the latest of each rank of its source, combined."""

    kind: ClassVar[str] = "serving"
    source: str  # "log" or "metrics"
    line_no: int | None
    reading: str  # what kind of line or scrape it came from
    running: int | None
    queued: int | None
    gen_tps: float | None
    kv_usage: float | None
    accept_len: float | None
    accept_rate: float | None
    preemptions: int
    ranks: int | None = opt()  # only when several ranks were combined


@dataclass(slots=True, kw_only=True)
class EtaEvent(Event):
    """A phase's ETA: from past startups (`p50_s`, `p90_s`, `n`, `to_ready_*`), or from the weights read so
    far (`basis` "bytes": `eta_s`, the rate, the bytes, `progress`)."""

    kind: ClassVar[str] = "eta"
    phase: str
    draft: bool | None = opt()
    basis: str
    n: int | None = opt()
    p50_s: float | None = opt()
    p90_s: float | None = opt()
    to_ready_p50_s: float | None = opt()
    to_ready_p90_s: float | None = opt()
    eta_s: float | None = opt()
    read_bps: float | None = opt(along="eta_s")
    weights_read_bytes: int | None = opt(along="eta_s")
    weights_total_bytes: int | None = opt(along="eta_s")
    progress: float | None = opt(along="eta_s")


# One class per kind; a subclass (ProgressSoFarEvent, NodeStallEvent) has its parent's kind.
EVENT_TYPES: tuple[type[Event], ...] = (
    LaunchEvent,
    PhaseEvent,
    ProgressEvent,
    FactEvent,
    WarningEvent,
    StallEvent,
    ActivityEvent,
    ReadyEvent,
    FailedEvent,
    TimeoutEvent,
    StalledEvent,
    StateEvent,
    LineEvent,
    ServingEvent,
    EtaEvent,
)
# The kinds: the SPEC's (`state`, `ready`, `failed`, `timeout`, `stalled` come only from the verdict machine),
# plus "launch" (a new launch began in the same log), "activity" and "eta" (what moves, and when a phase should
# end) and "line" (the last meaningful line, for live views).
EVENT_CLASSES: dict[str, type[Event]] = {cls.kind: cls for cls in EVENT_TYPES}
KINDS: tuple[str, ...] = tuple(EVENT_CLASSES)

__all__ = [
    "EVENT_CLASSES",
    "EVENT_TYPES",
    "KINDS",
    "ActivityEvent",
    "EtaEvent",
    "Event",
    "FactEvent",
    "FailedEvent",
    "LaunchEvent",
    "LineEvent",
    "NodeStallEvent",
    "PhaseEvent",
    "ProgressEvent",
    "ProgressSoFarEvent",
    "ReadyEvent",
    "ServingEvent",
    "StallEvent",
    "StalledEvent",
    "StateEvent",
    "TimeoutEvent",
    "WarningEvent",
]
