"""`bootwatch probe`: a Kubernetes exec probe that fails only when the server is dead or stalled.

It reads the state file a `bootwatch watch --state FILE` (a sidecar) or `bootwatch run --state FILE` keeps,
or, given a LOG instead, reads the log's last launch again. Elapsed time alone never fails it: a model that
takes an hour to load and keeps making progress passes every probe. Exit codes:

    0  ready, or (unless --ready) starting and not stalled
    1  dead: the startup failed, the server died, or its process is gone
    3  starting (with --ready only: "not yet")
    4  stalled: silent too long for its phase
    2  bad use: no such state file or log, a bad DUR

It imports almost nothing: a probe runs every few seconds on a busy node (bench/probe_cost.py measures it).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bootwatch.errors import UsageError
from bootwatch.probe_state import STALE_AFTER_S, ProbeState, read

READY, DEAD, STARTING, STALLED = 0, 1, 3, 4


@dataclass(frozen=True)
class Answer:
    status: str  # ready | starting | dead | stalled | unknown
    detail: str
    phase: str | None = None

    def code(self, ready_only: bool) -> int:
        if self.status == "ready":
            return READY
        if self.status == "dead":
            return DEAD
        if self.status == "stalled":
            return STALLED
        return STARTING if ready_only else READY


def _pid_alive(pid: int | None) -> bool | None:
    """None when it cannot be told (no pid, or another pid namespace: a sidecar)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:  # -1 would ask about every process
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return True


def _silence(source: str, fallback_t: float | None, now: float) -> float | None:
    """Seconds since the log last grew (its mtime), or since the last event when the source is no file."""
    try:
        return max(0.0, now - os.stat(source).st_mtime)
    except (OSError, ValueError):
        return None if fallback_t is None else max(0.0, now - fallback_t)


def _stalled(stall_s: float | None, phase: str | None, silent_s: float | None) -> bool:
    if stall_s is None or silent_s is None:
        return False
    from bootwatch.tracker.verdict import stall_state  # only now: the tracker's import costs ~60 ms

    st = stall_state(stall_s, phase or "start", silent_s)
    return st is not None and st.stalled


def from_state(st: ProbeState, stall_s: float | None, now: float) -> Answer:
    where = f" in {st.phase}" if st.phase and st.phase != "ready" else ""
    prog = f" {st.progress * 100:.0f}%" if st.progress is not None and st.state == "starting" else ""
    if st.state == "ready":
        if _pid_alive(st.server_pid) is False:
            return Answer("dead", f"was ready; server pid {st.server_pid} is gone", st.phase)
        return Answer("ready", "ready", st.phase)
    if st.state in ("failed", "died"):
        return Answer("dead", f"{st.state}{where}: {st.root_cause or 'no root cause known'}", st.phase)
    if st.state == "stalled":
        return Answer("stalled", f"stalled{where}", st.phase)
    if _pid_alive(st.server_pid) is False:
        return Answer("dead", f"server pid {st.server_pid} is gone{where}", st.phase)
    silent = _silence(st.source, st.last_event, now)
    if st.state == "starting" and _stalled(stall_s, st.phase, silent):
        return Answer("stalled", f"silent for {silent:.0f} s{where}", st.phase)
    # starting, a watcher that gave up on its own timeout (elapsed time is no reason to fail), or stopped
    return Answer("starting", f"starting{where}{prog}", st.phase)


def from_log(path: Path, stall_s: float | None, now: float) -> Answer:
    from bootwatch.pipeline import analyze_path

    s = analyze_path(path)
    phases = s.get("phases") or []
    phase = phases[-1]["name"] if phases else None
    if s["verdict"] == "ready":
        rf = s.get("runtime_failure")
        return Answer("dead", f"died after ready: {rf['text']}", phase) if rf else Answer("ready", "ready", phase)
    if s["verdict"] == "failed":
        return Answer("dead", f"failed in {phase}: {(s.get('failure') or {}).get('text')}", phase)
    silent = _silence(str(path), None, now)
    if _stalled(stall_s, phase, silent):
        return Answer("stalled", f"the log is silent for {silent:.0f} s in {phase}", phase)
    return Answer("starting", f"starting in {phase}" if phase else "starting", phase)


def probe(state: Path | None, log: Path | None, stall_s: float | None, now: float | None = None) -> Answer:
    now = time.time() if now is None else now
    if state is not None:
        try:
            st = read(state)
        except FileNotFoundError:
            if log is None:
                # The watcher has not written it yet (a sidecar starting): no reason to fail.
                return Answer("unknown", f"{state}: not written yet")
            st = None
        except (OSError, ValueError, TypeError) as e:
            raise UsageError(f"{state}: cannot read the state file: {e}") from None
        if st is not None:
            age = now - st.heartbeat if isinstance(st.heartbeat, int | float) else math.nan
            # A heartbeat that is NaN or far in the future (a clock step) proves nothing: stale, like an old one.
            stale = not st.extra.get("final") and not (-STALE_AFTER_S <= age <= STALE_AFTER_S)
            if not stale:
                return from_state(st, stall_s, now)
            if log is None:
                answer = from_state(st, stall_s, now)
                if answer.status in ("dead", "stalled"):
                    return answer
                return Answer(
                    "unknown",
                    f"the watcher (pid {st.pid}) stopped writing {state} "
                    f"{now - st.heartbeat:.0f} s ago; {answer.detail}",
                    st.phase,
                )
    if log is None:
        raise UsageError("probe needs --state FILE or a LOG")
    return from_log(log, stall_s, now)


def main(args: Any) -> int:
    from bootwatch.text import shown

    state = Path(args.state) if getattr(args, "state", None) else None
    log = Path(args.log) if getattr(args, "log", None) else None  # an argparse Namespace of `probe`
    if log is not None and not log.exists():
        raise UsageError(f"{log}: no such file")
    answer = probe(state, log, getattr(args, "stall", None))
    code = answer.code(bool(getattr(args, "ready", False)))
    if getattr(args, "json", False):
        print(
            json.dumps(
                {"status": answer.status, "phase": answer.phase, "detail": shown(answer.detail), "exit_code": code}
            )
        )
    else:
        print(f"{answer.status}: {shown(answer.detail)}")
    sys.stdout.flush()
    return code


__all__ = ["Answer", "from_log", "from_state", "main", "probe"]
