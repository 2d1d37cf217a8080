"""The probe's state file: what a `watch` or `run` knows of a startup, for `bootwatch probe` to read.

One small JSON object, replaced atomically (written to a temporary file in the same directory, then renamed)
on every phase, progress step, verdict and stall warning, and at least every HEARTBEAT_S: a reader never
sees half a file, and an old heartbeat says the writer is gone. It holds no log text but the root cause,
masked like every other output.

    {"version": 1, "pid": 123, "heartbeat": 1760000000.0, "started": ..., "source": "server.log",
     "state": "starting | ready | failed | stalled | timeout | incomplete | died | stopped",
     "phase": "load_weights", "progress": 0.4, "last_event": ..., "stall_warning": false,
     "root_cause": null, "server_pid": 456}
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the probe reads this module and must not pay for the tracker's import
    from bootwatch.tracker import Event

VERSION = 1
HEARTBEAT_S = 2.0
# Heartbeats missed before the writer counts as gone (a loaded node can pause a process for seconds).
STALE_AFTER_S = 15.0


@dataclass
class ProbeState:
    pid: int
    started: float
    source: str
    state: str = "starting"
    phase: str | None = None
    progress: float | None = None
    last_event: float | None = None
    stall_warning: bool = False
    root_cause: str | None = None
    server_pid: int | None = None
    heartbeat: float = 0.0
    version: int = VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        from bootwatch.text.redact import redact_obj

        d = asdict(self)
        d.update(d.pop("extra"))
        out: dict[str, Any] = redact_obj(d)  # the file is read by probes and people: no secret in any field
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ProbeState:
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        return cls(**{k: v for k, v in d.items() if k in known}, extra={k: v for k, v in d.items() if k not in known})


def write_atomic(path: Path, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.chmod(tmp, 0o644)  # a probe may run as another user (an exec probe in a sidecar)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read(path: Path) -> ProbeState:
    """The state in the file; FileNotFoundError for an empty one too (a watcher that has not written yet: the
    write is atomic, but a file created by hand or by a volume mount starts empty); ValueError when it is not
    a state (JSON that is no object)."""
    with path.open() as f:
        text = f.read()
    if not text.strip():
        raise FileNotFoundError(f"{path}: empty")
    d = json.loads(text)
    if not isinstance(d, dict):
        raise ValueError(f"not a bootwatch state (a JSON {type(d).__name__})")
    return ProbeState.from_json(d)


class StateSink:
    """A sink that keeps the state file up to date. The heartbeat thread rewrites it while nothing happens:
    a silent phase must not look like a dead watcher."""

    def __init__(
        self, path: Path, source: str, server_pid: int | None = None, heartbeat_s: float = HEARTBEAT_S
    ) -> None:
        self.path = path
        self.state = ProbeState(pid=os.getpid(), started=time.time(), source=source, server_pid=server_pid)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._write()
        self._thread = threading.Thread(target=self._beat, args=(heartbeat_s,), name="bootwatch-state", daemon=True)
        self._thread.start()

    def _write(self) -> None:
        with self._lock:
            self.state.heartbeat = time.time()
            with contextlib.suppress(OSError):  # a full disk must not stop the watch; the probe sees a stale file
                write_atomic(self.path, self.state.to_json())

    def _beat(self, every: float) -> None:
        while not self._stop.wait(every):
            self._write()

    def note(self, now: float, text: str) -> None:
        pass

    def event(self, ev: Event, now: float) -> None:
        from bootwatch.text import redact
        from bootwatch.tracker.events import FailedEvent, PhaseEvent, ProgressEvent, StallEvent, StateEvent

        s = self.state
        s.last_event = now
        match ev:
            case PhaseEvent():
                if not ev.name:
                    return
                s.phase, s.progress = ev.name, None
                s.stall_warning = False
            case ProgressEvent():
                if ev.progress is None:
                    return
                s.progress, s.stall_warning = float(ev.progress), False
            case StallEvent():
                s.stall_warning = True
            case StateEvent():
                # The verdict machine's state, as it said it (after readiness a death is `died`: the startup
                # stays ready, the server does not).
                s.state = ev.state
                if ev.state == "ready":
                    s.phase, s.progress = "ready", 1.0
            case FailedEvent():
                s.root_cause = redact(ev.text or "") or None
            case _:
                return
        self._write()

    def set_server(self, pid: int) -> None:
        self.state.server_pid = pid
        self._write()

    def close(self, summary: dict[str, Any], now: float) -> None:
        from bootwatch.text import redact

        self._stop.set()
        s = self.state
        s.state = str(summary.get("outcome") or s.state)  # the machine's, as the summary says it
        failure = summary.get("failure") or summary.get("runtime_failure") or {}
        if failure.get("text"):
            s.root_cause = redact(str(failure["text"]))
        # The watcher leaves: its last word stays, and its heartbeat stops (a reader sees `final`).
        s.extra["final"] = True
        self._write()


__all__ = ["HEARTBEAT_S", "STALE_AFTER_S", "ProbeState", "StateSink", "read", "write_atomic"]
