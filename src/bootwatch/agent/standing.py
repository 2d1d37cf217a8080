"""Where a startup stands when a bounded wait returns: one object for scripts and agents (`standing` in the
JSON), two lines for a person (or an agent reading text)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from bootwatch.durations import fmt_duration
from bootwatch.text import shown
from bootwatch.tracker.events import EtaEvent

LINE_CHARS = 300  # the last line, cut: an agent's context is not for a 64 KiB JSON dump


@dataclass
class Standing:
    state: str  # starting | ready | failed | stalled | timeout | died | interrupted
    phase: str | None
    progress: float | None  # of the phase, 0..1, when it counts steps
    elapsed_s: float | None  # since the launch began (or was first seen)
    phase_elapsed_s: float | None
    eta: dict[str, Any] | None  # from past startups like this one (p50/p90 of the phase and to ready)
    last_line: dict[str, Any] | None  # {"line_no", "text"}: the last meaningful line
    moved: bool  # anything new since the previous call (lines, phase, progress, state)
    new_lines: int  # lines since the previous call
    silent_s: float | None  # since the log last grew
    waited_s: float
    calls: int  # bounded waits on this launch so far, this one included
    time_to_ready_s: float | None = None
    root_cause: str | None = None
    ready_line: str | None = None
    server: dict[str, Any] | None = None  # {"pid", "alive"} of the server run --detach started
    log: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("elapsed_s", "phase_elapsed_s", "silent_s", "waited_s"):
            if d[k] is not None:
                d[k] = round(d[k], 3)
        if d["progress"] is not None:
            d["progress"] = round(d["progress"], 4)
        return d

    @classmethod
    def build(
        cls,
        *,
        session: Any,
        summary: dict[str, Any],
        state: Any,
        prev: Any,
        now: float,
        waited_s: float,
        etas: dict[str, EtaEvent],
        notes: list[str],
        log_path: str | None,
        server_alive: bool | None,
    ) -> Standing:
        launch = session.tracker.launch
        cur = launch.current if launch is not None else None
        began = [t for t in (state.launch_seen_t, launch.start_t if launch is not None else None) if t is not None]
        outcome = state.outcome or "starting"
        failure = summary.get("failure") or {}
        ready = summary.get("ready") or {}
        new_lines = max(0, state.lines - prev.lines) if prev is not None else state.lines
        moved = prev is None or bool(
            new_lines or state.phase != prev.phase or state.progress != prev.progress or outcome != prev.outcome
        )
        last = None
        if launch is not None and launch.last_line:
            last = {"line_no": launch.last_no, "text": shown(launch.last_line)[:LINE_CHARS]}
        server = None
        if state.server is not None:
            server = {"pid": state.server.pid, "alive": bool(server_alive)}
        return cls(
            state=outcome,
            phase=cur.name if cur is not None else None,
            progress=cur.progress if cur is not None else None,
            elapsed_s=now - min(began) if began else None,
            phase_elapsed_s=now - cur.start_t if cur is not None and cur.start_t is not None else None,
            eta=_eta(session, cur, etas),
            last_line=last,
            moved=moved,
            new_lines=new_lines,
            silent_s=max(0.0, now - session.machine.last_output),
            waited_s=waited_s,
            calls=state.calls,
            time_to_ready_s=summary.get("time_to_ready_s") if outcome == "ready" else None,
            root_cause=shown(failure["text"])[:LINE_CHARS] if failure.get("text") else None,
            ready_line=shown(ready["text"])[:LINE_CHARS] if ready.get("text") else None,
            server=server,
            log=log_path,
            notes=[shown(n)[:LINE_CHARS] for n in notes[-5:]],
        )


def _eta(session: Any, cur: Any, etas: dict[str, EtaEvent]) -> dict[str, Any] | None:
    """The phase's ETA said during this call, else the one history gives for it now (a resumed call saw
    the phase begin in an earlier one)."""
    if cur is None or cur.name == "ready":
        return None
    ev = etas.get(cur.name)
    insight = session.insight
    if ev is None and insight is not None:
        try:
            book = insight._refresh_book()
            ev = insight._eta(cur.name, cur.draft, book, cur.start_t or 0.0) if book is not None else None
        except Exception:  # noqa: BLE001 - history only helps: no ETA is no failure
            ev = None
    if ev is None:
        return None
    d = ev.to_json(0.0)
    for k in ("t", "event", "node", "phase", "draft"):
        d.pop(k, None)
    return d


def _pct(p: float | None) -> str:
    return f" {p * 100:.0f}%" if p is not None else ""


def headline(s: Standing) -> str:
    took = fmt_duration(s.elapsed_s)
    phase = s.phase or "start"
    if s.state == "ready":
        took = fmt_duration(s.time_to_ready_s) if s.time_to_ready_s is not None else took
        return f"ready after {took}: {s.ready_line or '(the health check answered)'}"
    if s.state in ("failed", "died"):
        return f"failed in {phase} after {took}: {s.root_cause or '(no error text: see the log)'}"
    if s.state == "stalled":
        return f"stalled in {phase}: no output for {fmt_duration(s.silent_s)} (--stall)"
    if s.state == "timeout":
        return f"timed out in {phase} after {took} (--timeout)"
    if s.state == "interrupted":
        return f"interrupted while in {phase} ({took} in all); the server was left as it was"
    if s.phase is None:
        return f"still starting: nothing read yet ({took} in all)"
    text = f"still starting: {phase}{_pct(s.progress)} for {fmt_duration(s.phase_elapsed_s)} ({took} in all)"
    if s.eta:
        p50, rest = s.eta.get("p50_s"), s.eta.get("to_ready_p50_s")
        if s.eta.get("eta_s") is not None:
            text += f"; this phase ends in about {fmt_duration(s.eta['eta_s'])} at the read rate so far"
        elif p50 is not None:
            left = max(0.0, p50 - (s.phase_elapsed_s or 0.0))
            text += f"; this phase usually takes {fmt_duration(p50)} (about {fmt_duration(left)} left"
            text += f", ready ~{fmt_duration(rest)} after it starts)" if rest is not None else ")"
            text += f" from {s.eta.get('n')} past startup(s)"
    return text


def second_line(s: Standing) -> str:
    parts = []
    if s.last_line:
        parts.append(f"last line {s.last_line['line_no']}: {s.last_line['text']}")
    elif s.notes:
        parts.append(s.notes[-1])
    if s.calls > 1:
        if s.moved:
            parts.append(
                f"moved since the last call (+{s.new_lines} lines)" if s.new_lines else "changed since the last call"
            )
        else:
            parts.append(f"nothing moved since the last call (log silent {fmt_duration(s.silent_s)})")
    if s.server is not None and not s.server["alive"]:
        parts.append(f"server pid {s.server['pid']} is gone")
    elif s.server is not None and s.state not in ("failed", "died"):
        parts.append(f"server pid {s.server['pid']} runs on; log: {s.log}")
    if s.state == "starting":
        parts.append("exit 3: call again to keep waiting")
    return " · ".join(parts) or "(nothing read yet)"


def render_text(s: Standing) -> str:
    """Two lines: the state, then the last line and what changed."""
    return headline(s) + "\n" + second_line(s)


__all__ = ["Standing", "headline", "render_text", "second_line"]
