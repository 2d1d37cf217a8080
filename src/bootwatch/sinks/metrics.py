"""Prometheus export (`--metrics-port`): the startup as gauges, served while the server is still starting.

An engine's own /metrics comes up with its HTTP server, after the startup; an autoscaler or a dashboard
sees nothing of the minutes before. This sink turns bootwatch's events into prometheus_client metrics on a
registry of its own, served by prometheus_client's HTTP server (loopback unless --metrics-host says
otherwise):

    bootwatch_startup_phase{phase}            1 for the current phase (an Enum over the canonical phases)
    bootwatch_startup_state{state}            starting | ready | failed | stalled | timeout | incomplete | died
    bootwatch_startup_phase_progress          0..1 within the phase, when the log says
    bootwatch_startup_eta_seconds             when events carry an ETA
    bootwatch_startup_elapsed_seconds         since the watch began (frozen at the verdict)
    bootwatch_startup_time_to_ready_seconds   once ready
    bootwatch_startup_phase_transitions_total
    bootwatch_startup_stall_warnings_total
    bootwatch_startup_health_up               1 once the health URL answers 200
    bootwatch_startup_info{engine,engine_version,model}
    bootwatch_server_fact{name}               numeric facts (KV cache tokens, verify latency, and after
                                              ready whatever the follow mode reports as a fact)
"""

from __future__ import annotations

import errno
import math
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Info, start_http_server

from bootwatch.errors import UsageError
from bootwatch.text import shown
from bootwatch.tracker.events import (
    ActivityEvent,
    EtaEvent,
    Event,
    FactEvent,
    PhaseEvent,
    ProgressEvent,
    StallEvent,
    StateEvent,
)
from bootwatch.tracker.phases import ORDER

PHASES = (*ORDER, "other")  # the canonical phases, and whatever an engine of the user's names otherwise
STATES = ("starting", "ready", "failed", "stalled", "timeout", "incomplete", "died", "stopped")
_FACT_CAP = 64  # distinct fact names exported: a label per fact name must not grow without bound


class MetricsSink:
    def __init__(self, registry: CollectorRegistry | None = None, tracker: Any = None) -> None:
        self.tracker = tracker  # the engine is a judgement of the tracker's, not an event: read on phase changes
        self.registry = registry or CollectorRegistry()
        r, ns = self.registry, "bootwatch_startup"
        self.phase = Enum(f"{ns}_phase", "The startup phase bootwatch sees now", states=list(PHASES), registry=r)
        self.state = Enum(
            f"{ns}_state", "Where the startup stands: starting until a verdict", states=list(STATES), registry=r
        )
        self.progress = Gauge(
            f"{ns}_phase_progress", "Progress within the current phase (0..1), when known", registry=r
        )
        self.eta = Gauge(f"{ns}_eta_seconds", "Estimated seconds to ready, when known", registry=r)
        self.elapsed = Gauge(
            f"{ns}_elapsed_seconds", "Seconds since the watch began, frozen at the verdict", registry=r
        )
        self.to_ready = Gauge(f"{ns}_time_to_ready_seconds", "Seconds from the start to ready", registry=r)
        self.transitions = Counter(f"{ns}_phase_transitions", "Phase changes seen", registry=r)
        self.stalls = Counter(f"{ns}_stall_warnings", "Stall warnings (long silence in a phase)", registry=r)
        self.health = Gauge(f"{ns}_health_up", "1 once the health URL answers 200", registry=r)
        self.info = Info(f"{ns}", "The server being started", registry=r)
        self.facts = Gauge(
            "bootwatch_server_fact",
            "Numeric facts about the server (from its log, probe, follow mode)",
            ["name"],
            registry=r,
        )
        self.started = time.time()
        self.ended: float | None = None
        self.elapsed.set_function(lambda: (self.ended or time.time()) - self.started)
        self.progress.set(math.nan)
        self.eta.set(math.nan)
        self.to_ready.set(math.nan)
        self._info: dict[str, str] = {}
        self._facts: set[str] = set()
        self.server: Any = None

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        """Serve /metrics now (before the server starts: a port in use is a usage error, exit 2)."""
        try:
            self.server, _ = start_http_server(port, addr=host, registry=self.registry)
        except OSError as e:
            why = "is in use" if e.errno == errno.EADDRINUSE else f"cannot be used: {e.strerror or e}"
            raise UsageError(f"--metrics-port {port} on {host} {why}") from None

    @property
    def port(self) -> int | None:
        return int(self.server.server_address[1]) if self.server is not None else None

    def _set_info(self, **values: Any) -> None:
        changed = False
        for k, v in values.items():
            if v is None:
                continue
            shown_v = shown(str(v))[:200]  # a label is served over HTTP: no URL credentials, no controls
            if self._info.get(k) != shown_v:
                self._info[k] = shown_v
                changed = True
        if changed:
            self.info.info(dict(self._info))

    def _fact(self, name: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return
        if name not in self._facts and len(self._facts) >= _FACT_CAP:
            return
        self._facts.add(name)
        self.facts.labels(name=name).set(float(value))

    def note(self, now: float, text: str) -> None:
        pass

    def event(self, ev: Event, now: float) -> None:
        eta = ev.eta_s if isinstance(ev, EtaEvent | ActivityEvent) else None
        if isinstance(eta, int | float) and not isinstance(eta, bool):
            self.eta.set(float(eta))
        match ev:
            case PhaseEvent():
                self._on_phase(ev)
            case ProgressEvent():
                if ev.progress is not None:
                    self.progress.set(float(ev.progress))
            case StallEvent():
                self.stalls.inc()
            case StateEvent():
                self._on_state(ev, now)
            case FactEvent():
                self._on_fact(ev)

    def _on_state(self, ev: StateEvent, now: float) -> None:
        """The verdict machine's state, mirrored; its time to ready only for a startup it called ready."""
        if ev.state in STATES:
            self.state.state(ev.state)
        if ev.state == "ready":
            self.phase.state("ready")
            if ev.time_to_ready_s is not None:
                self.to_ready.set(ev.time_to_ready_s)
            self.eta.set(0.0)
        if ev.state != "starting" and self.ended is None:
            self.ended = now

    def _on_phase(self, ev: PhaseEvent) -> None:
        name = ev.name
        self.phase.state(name if name in PHASES else "other")
        self.progress.set(1.0 if name == "ready" else math.nan)
        self.transitions.inc()
        launch = getattr(self.tracker, "launch", None)
        if launch is not None and getattr(launch, "engine", "unknown") != "unknown":
            self._set_info(engine=launch.engine)

    def _on_fact(self, ev: FactEvent) -> None:
        name = ev.name
        if name == "health":
            self.health.set(1.0 if ev.value == "200" else 0.0)
        elif name == "engine":
            self._set_info(engine=ev.value)
        elif name in ("engine_version", "model"):
            self._set_info(**{name: ev.value})
        elif name:
            self._fact(name, ev.value)

    def close(self, summary: dict[str, Any], now: float) -> None:
        outcome = str(summary.get("outcome") or "")
        if outcome in STATES:
            self.state.state(outcome)
        ttr = summary.get("time_to_ready_s")
        if summary.get("verdict") == "ready" and isinstance(ttr, int | float):
            self.to_ready.set(float(ttr))
        else:
            self.to_ready.set(math.nan)  # never a time to ready for a startup that was not ready
        self._set_info(
            engine=summary.get("engine"),
            engine_version=summary.get("engine_version"),
            model=(summary.get("facts") or {}).get("model"),
        )
        for name, value in (summary.get("facts") or {}).items():
            self._fact(str(name), value)
        if self.ended is None:
            self.ended = now


__all__ = ["MetricsSink", "PHASES", "STATES"]
