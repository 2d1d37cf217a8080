"""What the MCP tools do, without MCP: each runs the bootwatch command an agent without MCP would run (the
same guard, log, state file and redaction), in a process of its own, and turns its JSON into an answer:
the JSON object and two lines of text. A command that fails (a bad source, an unreadable log) is a
`ToolFailure` with its message; nothing here may end the server that calls it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from bootwatch.agent import resume
from bootwatch.durations import fmt_duration
from bootwatch.text import shown
from bootwatch.text.redact import redact, redact_obj
from bootwatch.tracker.phases import RANK

STOP_GRACE_S = 20.0  # SIGTERM, then this long for the group to go, then SIGKILL
MAX_WAIT_S = 3600.0


class ToolFailure(Exception):
    """Bad input or a command that could not do its job: the tool answers with an error, the server lives."""


@dataclass
class Answer:
    data: dict[str, Any]
    text: str  # two lines

    def json_text(self) -> str:
        return json.dumps(redact_obj(self.data), ensure_ascii=True)


@dataclass
class Started:
    pid: int
    create_time: float
    log: str
    command: list[str]


@dataclass
class Tools:
    """The state of one MCP session: the servers it started (the only ones it will stop)."""

    bootwatch: list[str] = field(default_factory=lambda: [sys.executable, "-m", "bootwatch"])
    started: dict[int, Started] = field(default_factory=dict)
    log_dir: Path = field(default_factory=lambda: resume.state_dir().parent / "logs")

    # ---- running bootwatch ------------------------------------------------------------------------
    async def _cli(
        self, args: list[str], on_line: Callable[[str], Awaitable[None]] | None = None
    ) -> tuple[int, str, str]:
        """Run bootwatch with `args`; each line of its output goes to `on_line` as it comes."""
        proc = await asyncio.create_subprocess_exec(
            *self.bootwatch,
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "BOOTWATCH_DEBUG": ""},
            limit=1 << 24,  # a summary line can be long (facts, warnings)
        )
        assert proc.stdout is not None and proc.stderr is not None
        err_task = asyncio.ensure_future(proc.stderr.read())
        out: list[str] = []
        try:
            async for raw in proc.stdout:
                line = raw.decode(errors="replace").rstrip("\n")
                out.append(line)
                if on_line is not None:
                    await on_line(line)
            await proc.wait()
            err = (await err_task).decode(errors="replace")
        except BaseException:
            # The tool call was cancelled: the bounded wait it ran goes too (it never stops a server).
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            err_task.cancel()
            raise
        return proc.returncode or 0, "\n".join(out), err

    async def _json(
        self, args: list[str], ok: tuple[int, ...], on_line: Callable[[str], Awaitable[None]] | None = None
    ) -> tuple[int, dict[str, Any]]:
        code, out, err = await self._cli(args, on_line)
        last = next((ln for ln in reversed(out.splitlines()) if ln.startswith("{")), None)
        if code not in ok or last is None:
            raise ToolFailure(_error_text(err, code))
        return code, json.loads(last)

    # ---- the tools ----------------------------------------------------------------------------------
    async def start_server(
        self,
        command: list[str],
        log: str | None,
        url: str | None,
        engine: str | None,
        wait_s: float,
    ) -> Answer:
        if not command or not all(isinstance(a, str) and a for a in command):
            raise ToolFailure("command: the server's command line as a list of words, e.g. ['vllm', 'serve', 'M']")
        _check_wait(wait_s)
        if log is None:
            resume_dir = self.log_dir
            resume_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            name = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(command[0]).name)[:40] or "server"
            log = str(resume_dir / f"bootwatch-{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")
        args = ["run", "--detach", "--json", "--wait-at-most", f"{wait_s:.3f}s", "--log", log]
        args += _opt("--url", url) + _opt("--engine", engine) + ["--", *command]
        code, data = await self._json(args, ok=(0, 1, 3, 4, 124))
        st = data.get("standing") or {}
        server = st.get("server") or {}
        pid = server.get("pid")
        if isinstance(pid, int):
            try:
                created = psutil.Process(pid).create_time()
            except psutil.Error:
                created = 0.0
            self.started[pid] = Started(pid, created, log, command)
        return Answer(_compact(data, code), _standing_text(data))

    async def wait_for_startup(
        self,
        source: str,
        wait_s: float,
        url: str | None,
        engine: str | None,
        progress: Callable[[float, float, str], Awaitable[None]] | None = None,
    ) -> Answer:
        """One bounded wait (`watch SOURCE --wait-at-most wait_s --json`); each phase and progress event it
        prints becomes a progress notification (the phase as a number that only grows; ready is the total)."""
        _check_source(source)
        _check_wait(wait_s)
        said = [-1.0]

        async def on_line(line: str) -> None:
            if progress is None or not line.startswith("{"):
                return
            try:
                ev = json.loads(line)
            except ValueError:
                return
            step = _event_progress(ev)
            if step is not None and step[0] > said[0]:
                said[0] = step[0]
                await progress(step[0], float(RANK["ready"]), step[1])

        args = ["watch", source, "--json", "--wait-at-most", f"{wait_s:.3f}s"]
        args += _opt("--url", url) + _opt("--engine", engine)
        code, data = await self._json(args, (0, 1, 3, 4, 124), on_line)
        st = data.get("standing") or {}
        if progress is not None and st.get("state") == "ready" and said[0] < RANK["ready"]:
            await progress(float(RANK["ready"]), float(RANK["ready"]), "ready")  # read before we looked
        return Answer(_compact(data, code), _standing_text(data))

    async def read_log(self, path: str, engine: str | None) -> Answer:
        _check_source(path)
        _, data = await self._json(["report", path, "--json", *_opt("--engine", engine)], ok=(0,))
        return Answer(_compact_report(data), _report_text(data, path))

    async def server_state(self, source: str | None, pid: int | None) -> Answer:
        if pid is not None:
            s = self._ours(pid)
            source = source or s.log
        if not source:
            raise ToolFailure("give source (a log, ssh://, docker://, k8s://) or the pid of a server started here")
        answer = await self.wait_for_startup(source, 0.0, None, None)
        if pid is not None:
            alive = _alive(self.started[pid])
            answer.data["server"] = {"pid": pid, "alive": alive, "started_here": True}
            if not alive:
                answer.text += f" · server pid {pid} is gone"
        return answer

    async def stop_server(self, pid: int) -> Answer:
        s = self._ours(pid)
        if not _alive(s):
            del self.started[pid]
            return Answer(
                {"pid": pid, "stopped": False, "reason": "already gone", "log": s.log},
                f"server pid {pid} had already exited\nits log: {s.log}",
            )
        how = await _stop_group(pid)
        del self.started[pid]
        text = f"stopped server pid {pid} ({how})\nits log: {s.log}"
        return Answer({"pid": pid, "stopped": True, "how": how, "log": s.log}, text)

    async def list_startups(self, limit: int) -> Answer:
        if not 1 <= limit <= 1000:
            raise ToolFailure(f"limit {limit}: from 1 to 1000")
        code, out, err = await self._cli(["history", "--json", "--limit", str(limit)])
        if code != 0:
            raise ToolFailure(_error_text(err, code))
        rows = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
        last = rows[-1] if rows else None
        text = f"{len(rows)} startup(s) in the history"
        if last is not None:
            text += f"\nlatest: {shown(str(last.get('model') or last.get('source') or '?'))}: {last.get('outcome')}"
        else:
            text += "\n(none recorded yet: watch or run records each startup it sees end)"
        return Answer({"startups": rows}, text)

    def _ours(self, pid: int) -> Started:
        s = self.started.get(pid)
        if s is None:
            mine = ", ".join(str(p) for p in self.started) or "none"
            raise ToolFailure(f"pid {pid} was not started by this bootwatch mcp session (started here: {mine})")
        return s


# ---- helpers ------------------------------------------------------------------------------------------
def _opt(flag: str, value: str | None) -> list[str]:
    return [flag, value] if value else []


def _check_wait(wait_s: float) -> None:
    if not 0 <= wait_s <= MAX_WAIT_S:
        raise ToolFailure(f"wait_s {wait_s}: from 0 to {MAX_WAIT_S:.0f} seconds")


def _check_source(source: str) -> None:
    if not source or source.startswith("-"):
        raise ToolFailure(f"source {shown(source)!r}: a log path, ssh://host/path, docker://NAME or k8s://ns/pod")


def _error_text(err: str, code: int) -> str:
    lines = [ln.removeprefix("bootwatch: ") for ln in err.splitlines() if ln.strip()]
    return redact(lines[-1]) if lines else f"bootwatch exited {code} with no message"


def _alive(s: Started) -> bool:
    try:
        p = psutil.Process(s.pid)
        return abs(p.create_time() - s.create_time) < 1.0 and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


async def _stop_group(pid: int) -> str:
    """`run` puts the server in a process group of its own (pgid = its pid): SIGTERM to the group, then
    SIGKILL if anything of it is left after the grace."""
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return "already gone"
    target = pgid if pgid == pid else None  # not its own group leader: signal the process alone
    send: Callable[[int], None] = (
        (lambda sig: os.killpg(pid, sig)) if target is not None else (lambda sig: os.kill(pid, sig))
    )

    def gone() -> bool:
        return not _group_alive(pid) if target is not None else not psutil.pid_exists(pid)

    for sig, grace in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            send(sig)
        end = time.monotonic() + grace
        while time.monotonic() < end:
            if gone():
                return signal.Signals(sig).name
            await asyncio.sleep(0.1)
    return "SIGKILL (something of it may be left)"


def _event_progress(ev: dict[str, Any]) -> tuple[float, str] | None:
    """A phase, progress or ready event as (a number that grows as the startup goes: the phase's rank plus
    its progress within it, message)."""
    kind = ev.get("event")
    if kind == "ready":
        return float(RANK["ready"]), "ready"
    if kind == "phase" and ev.get("name") in RANK:
        return float(RANK[ev["name"]]), f"phase {ev['name']}"
    if kind == "progress" and ev.get("phase") in RANK and isinstance(ev.get("progress"), int | float):
        p = min(float(ev["progress"]), 0.99)
        return RANK[ev["phase"]] + p, f"{ev['phase']} {float(ev['progress']) * 100:.0f}%"
    return None


def _compact(data: dict[str, Any], code: int) -> dict[str, Any]:
    """What an agent needs of a bounded wait's JSON: the standing, and the summary's verdict and root cause."""
    failure = data.get("failure") or {}
    return {
        "exit_code": code,
        "standing": data.get("standing"),
        "verdict": data.get("verdict"),
        "engine": data.get("engine"),
        "failure": {k: failure.get(k) for k in ("line_no", "text", "category")} if failure else None,
        "ready": data.get("ready"),
        "warnings": [w.get("text") for w in data.get("warnings") or []][:5],
    }


def _compact_report(data: dict[str, Any]) -> dict[str, Any]:
    keep = ("verdict", "engine", "engine_version", "ready", "failure", "phases", "warnings", "time_to_ready_s")
    return {k: data.get(k) for k in keep}


def _standing_text(data: dict[str, Any]) -> str:
    from bootwatch.agent.standing import Standing, render_text

    st = data.get("standing")
    if not isinstance(st, dict):
        return f"verdict {data.get('verdict')}\n(no standing in the answer)"
    known = {k: v for k, v in st.items() if k in Standing.__dataclass_fields__}
    return render_text(Standing(**known))


def _report_text(data: dict[str, Any], path: str) -> str:
    verdict = data.get("verdict")
    failure = data.get("failure") or {}
    ready = data.get("ready") or {}
    phases = data.get("phases") or []
    last_phase = phases[-1]["name"] if phases else "start"
    head = f"{shown(path)}: {data.get('engine_display') or data.get('engine')} startup {verdict}"
    if verdict == "failed":
        where = f", line {failure['line_no']}" if failure.get("line_no") is not None else ""  # an exit has no line
        return (
            f"{head} in {last_phase} ({failure.get('category')})\nroot cause{where}: {shown(str(failure.get('text')))}"
        )
    if verdict == "ready":
        return f"{head} after {fmt_duration(data.get('time_to_ready_s'))}\nready line {ready.get('line_no')}: {shown(str(ready.get('text')))}"
    return f"{head}: the log ends in {last_phase}\n(no verdict from the text alone: still starting, hung, or stopped)"


__all__ = ["Answer", "Started", "ToolFailure", "Tools"]
