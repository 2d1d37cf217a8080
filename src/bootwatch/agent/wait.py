"""The bounded wait (`watch --wait-at-most DUR`, `run --detach --wait-at-most DUR`): watch for at most DUR,
then say where the startup stands and exit 3 "still starting" if it is neither ready nor failed. It never
judges the startup for taking long (that is --timeout, 124) and never stops a server. Each call leaves a
small state (agent/resume.py) so that the next one continues where it stopped."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from bootwatch.agent import resume
from bootwatch.agent.standing import Standing, render_text
from bootwatch.errors import UsageError
from bootwatch.pipeline import Analyzer, analyze_file, count_lines, launch_marker, year_of
from bootwatch.sinks.protocol import Sink
from bootwatch.sources.container_state import Death
from bootwatch.sources.file import FileFollower, Kind, check_path, last_launch_offset
from bootwatch.sources.protocol import Source
from bootwatch.sources.spec import Spec, parse_source
from bootwatch.text.redact import redact_obj
from bootwatch.tracker.events import EtaEvent, Event
from bootwatch.tracker.verdict import EXIT, Outcome

STILL_STARTING = "starting"
EXIT_STILL_STARTING = 3
# A wait of 0 still looks once: the catch-up is read and the verdict machine gets one tick to conclude.
MIN_LOOK_S = 0.3


class Recorder:
    """The sink of a bounded wait. It keeps what the standing needs (the latest ETA of each phase,
    bootwatch's own notes); with --json the events also go out as they happen (the SPEC's stream: a resumed
    call prints only what is new), the summary with the standing last. Text output is the standing alone."""

    def __init__(self, json_out: bool = False) -> None:
        from bootwatch.sinks.events import JsonSink

        self.etas: dict[str, EtaEvent] = {}
        self.notes: list[str] = []
        self.out = JsonSink() if json_out else None

    def note(self, now: float, text: str) -> None:
        self.notes.append(text)
        if self.out is not None:
            self.out.note(now, text)

    def event(self, ev: Event, now: float) -> None:
        if isinstance(ev, EtaEvent):
            self.etas[ev.phase] = ev
        if self.out is not None:
            self.out.event(ev, now)

    def close(self, summary: dict[str, Any], now: float) -> None:
        pass


async def until(coro: Awaitable[Any], wait_s: float) -> str:
    """`coro`'s outcome if it has one within `wait_s`, else "starting" (`coro` is cancelled: for a session
    that stops its reader and probe, never the server)."""
    task = asyncio.ensure_future(coro)
    try:
        done, _ = await asyncio.wait({task}, timeout=max(wait_s, MIN_LOOK_S))
        if task in done:
            return str(task.result())
        return STILL_STARTING
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def exit_code(outcome: str, interrupted_code: int) -> int:
    if outcome == STILL_STARTING:
        return EXIT_STILL_STARTING
    if outcome == "interrupted":
        return interrupted_code
    return EXIT.get(outcome, 1)


# ---- the server a previous call started ------------------------------------------------------------
def server_alive(mark: resume.ServerMark) -> bool:
    try:
        p = psutil.Process(mark.pid)
        return abs(p.create_time() - mark.create_time) < 1.0 and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def server_death(mark: resume.ServerMark | None) -> Callable[[], Death | None] | None:
    """For a server `run --detach` started: its disappearance is its death (not our child: no exit code)."""
    if mark is None:
        return None
    last = [0.0, True]

    def check() -> Death | None:
        now = time.monotonic()
        if now - last[0] >= 0.25:
            last[0], last[1] = now, server_alive(mark)
        if last[1]:
            return None
        return Death(None, None, f"the server process (pid {mark.pid}) is gone")

    return check


# ---- opening the source, resumed -------------------------------------------------------------------
class _Since:
    """A file followed from `start`: what it read since then is this call's output (for silence)."""

    def __init__(self, follower: FileFollower, start: int) -> None:
        self.follower, self.start = follower, start

    @property
    def bytes_read(self) -> int:
        return self.follower.offset - self.start

    def chunks(self) -> AsyncIterator[bytes]:
        return self.follower.chunks()

    def death(self) -> Death | None:
        return None

    async def aclose(self) -> None:
        await self.follower.aclose()


class _DiesWith:
    """A source whose server's death is also what `check` sees (a detached server that disappeared)."""

    def __init__(self, source: Source, check: Callable[[], Death | None]) -> None:
        self.source, self.check = source, check

    @property
    def bytes_read(self) -> int:
        return self.source.bytes_read

    def chunks(self) -> AsyncIterator[bytes]:
        return self.source.chunks()

    def death(self) -> Death | None:
        return self.source.death() or self.check()

    async def aclose(self) -> None:
        await self.source.aclose()


@dataclass
class Opened:
    followed: Source | None
    mark: resume.FileMark | None  # None for a stream (ssh, docker, k8s, a FIFO)
    resumed: bool  # the previous call's launch is this one
    offset: Callable[[], int] | None = None  # where reading has got to in the file (its byte offset)
    note: str | None = None


def open_file(path: Path, analyzer: Analyzer, args: Any, prev: resume.WaitState | None, note: Any) -> Opened:
    """The current launch of a file, read up to its last complete line: from the kept launch offset when the
    previous call saw this very file (device and inode) no longer than it is now, else from the launch a
    backward search finds (or the top with --from-start)."""
    kind = check_path(path)
    if kind is not Kind.FILE:  # missing yet (it may appear) or a FIFO: read as it comes
        return Opened(FileFollower(path, start=0, note=note), None, False)
    st = os.stat(path)
    mark = prev.file if prev is not None else None
    resumed = mark is not None and (mark.dev, mark.ino) == (st.st_dev, st.st_ino) and st.st_size >= mark.offset
    said = None
    if resumed and mark is not None:
        begin, first_line = mark.launch_offset, mark.launch_line
    else:
        if mark is not None:
            said = f"{path} is not the file the previous call read (replaced, rotated or truncated): reading anew"
        begin = 0 if args.from_start else last_launch_offset(path, launch_marker(args.rules))
        first_line = count_lines(path, begin) + 1 if begin else 1
    analyzer.next_no = first_line
    with path.open("rb") as f:
        f.seek(begin)
        fed, _ = analyze_file(f, analyzer, str(path), complete_only=True, clock=time.time)
    start = begin + fed
    if analyzer.tracker.launches > 1 and not args.from_start:
        # A new launch began after the one kept: the next call starts from it.
        begin = last_launch_offset(path, launch_marker(args.rules))
        first_line = count_lines(path, begin) + 1 if begin else 1
        resumed = False
    follower = FileFollower(path, start=start, note=note)
    followed = _Since(follower, start)
    new_mark = resume.FileMark(st.st_dev, st.st_ino, begin, first_line, start)
    return Opened(followed, new_mark, resumed, lambda: follower.offset, said)


def restore_times(analyzer: Analyzer, prev: resume.WaitState) -> None:
    """Lines read again carry the time of this call; give the launch and its phases the times the calls that
    first saw them kept (matched by line number, which does not change)."""
    launch = analyzer.tracker.launch
    if launch is None:
        return
    if prev.launch_t and prev.launch_t[0] == launch.start_line and prev.launch_t[1] is not None:
        launch.start_t = float(prev.launch_t[1])
    saved = {(str(n), int(line)): (s, e) for n, line, s, e in prev.phase_t}
    for ph in launch.phases:
        got = saved.get((ph.name, ph.start_line))
        if got is None:
            continue
        if got[0] is not None:
            ph.start_t = float(got[0])
        if got[1] is not None and ph.end_t is not None:
            ph.end_t = float(got[1])


def kept_times(analyzer: Analyzer, line_base: int = 0) -> tuple[list[Any] | None, list[list[Any]]]:
    """`line_base`: lines of the file before the first one this analyzer numbered 1 (`run` counts from its
    launch; a later `watch` of the file counts from its top)."""
    launch = analyzer.tracker.launch
    if launch is None:
        return None, []
    phases = [[p.name, p.start_line + line_base, p.start_t, p.end_t] for p in launch.phases]
    return [launch.start_line + line_base, launch.start_t], phases


# ---- watch --wait-at-most --------------------------------------------------------------------------
def check_args(args: Any) -> None:
    if args.wait_at_most < 0:
        raise UsageError("--wait-at-most: a duration of 0 or more")
    if len(args.sources) != 1 or getattr(args, "each", False):
        raise UsageError("--wait-at-most takes one SOURCE (run one bounded wait per server)")
    if getattr(args, "follow", False):
        raise UsageError("--follow and --wait-at-most: choose one (--follow never returns while the server runs)")
    if args.then:
        raise UsageError("--then and --wait-at-most: run the command once the wait exits 0")
    if args.verify and not args.url:
        raise UsageError("--verify needs --url")


def state_path(args: Any, spec: Spec) -> Path:
    if getattr(args, "wait_state", None):
        p = Path(args.wait_state)
        if not p.parent.is_dir():
            raise UsageError(f"--wait-state {args.wait_state}: the directory {p.parent} does not exist")
        return p
    return resume.default_path(resume.source_key(spec.kind, spec.text, spec.path if spec.kind == "file" else None))


async def watch(args: Any) -> int:
    """`watch SOURCE --wait-at-most DUR`."""
    from bootwatch.insight.live import watch_insight
    from bootwatch.opening import Opening, open_source
    from bootwatch.probes.http import HttpProbe
    from bootwatch.probes.url import check_url
    from bootwatch.session import Options, Session

    check_args(args)
    if args.url:
        check_url(args.url)
    spec = parse_source(args.sources[0])
    where = state_path(args, spec)
    prev = resume.load(where)
    now0 = time.time()
    year = year_of(spec.path) if spec.kind == "file" and Path(spec.path).exists() else None
    analyzer = Analyzer(engine=args.engine, rules=args.rules, year=year, clock="arrival")
    recorder = Recorder(json_out=args.json)
    sink = _with_extras(recorder, args, spec.text, analyzer)
    note = lambda text: recorder.note(time.time(), text)  # noqa: E731
    if spec.kind == "file":
        opened = open_file(Path(spec.path), analyzer, args, prev, note)
    else:
        opening = Opening(analyzer, sink, from_start=args.from_start, rules=tuple(args.rules), attach_ready=True)
        opened = Opened(open_source(spec, opening), None, prev is not None)
    if opened.note:
        recorder.note(now0, opened.note)
    if not opened.resumed or prev is None:
        prev_for_launch = None
        said = analyzer.tracker.snapshot()  # what the launch went through before the first call looked
    else:
        prev_for_launch = prev
        restore_times(analyzer, prev)
        said = _current_phase(analyzer.tracker.snapshot())  # a resumed stream starts where it stands
    for ev in said:
        sink.event(ev, now0)
    server = prev_for_launch.server if prev_for_launch is not None else None
    pid = args.pid if args.pid is not None else (server.pid if server is not None and server_alive(server) else None)
    probe = HttpProbe(args.url) if args.url else None
    assert opened.followed is not None
    dies = server_death(server)
    source: Source = opened.followed if dies is None else _DiesWith(opened.followed, dies)
    session = Session(
        analyzer,
        sink,
        Options(timeout_s=args.timeout, stall_s=args.stall, verify=args.verify),
        probe=probe,
        source=source,
        insight=watch_insight(analyzer, pid),
    )
    launch_seen_t = prev_for_launch.launch_seen_t if prev_for_launch is not None else now0
    _carry_clock(session, launch_seen_t, _last_output_t(spec, prev_for_launch, now0))
    chunks = source.chunks()
    try:
        outcome = await _bounded(session, chunks, args.wait_at_most)
    finally:
        with contextlib.suppress(Exception):
            await chunks.aclose()  # type: ignore[attr-defined]
        await source.aclose()
        if probe is not None:
            await probe.close()
    return conclude(args, spec.text, session, recorder, opened, prev_for_launch, where, outcome, now0, server)


def _left_of(wait_s: float) -> float:
    """DUR counts from when this bootwatch process began (its imports and catch-up included): "at most" is
    what a caller with a tool-call budget relies on. The age comes from /proc (start time and uptime, both
    in 10 ms ticks since boot): psutil's create_time adds the boot time, which /proc gives in whole seconds."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        age = uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return wait_s
    return wait_s - min(max(0.0, age), wait_s)


async def _bounded(session: Any, chunks: Any, wait_s: float) -> str:
    from bootwatch.runner import until_stopped
    from bootwatch.sources.interrupts import interrupts

    return await until_stopped(until(session.run(chunks), _left_of(wait_s)), interrupts())


def _current_phase(snapshot: list[Event]) -> list[Event]:
    """Of a catch-up snapshot, the current phase's events only: what a resumed call's stream says first."""
    from bootwatch.tracker.events import PhaseEvent

    last = max((i for i, ev in enumerate(snapshot) if isinstance(ev, PhaseEvent)), default=None)
    return [] if last is None else snapshot[last:]


def _with_extras(recorder: Recorder, args: Any, source: str, analyzer: Analyzer) -> Sink:
    from bootwatch.commands import output_of
    from bootwatch.sinks.registry import with_extras

    return with_extras(recorder, output_of(args), source, analyzer.tracker)


def _last_output_t(spec: Spec, prev: resume.WaitState | None, now: float) -> float:
    """When the source last grew: a file's modification time says it exactly; a stream, what the previous
    call saw (else now: nothing is known of the silence before we looked)."""
    if spec.kind == "file":
        with contextlib.suppress(OSError):
            return min(now, os.stat(spec.path).st_mtime)
    return prev.last_moved_t if prev is not None else now


def _carry_clock(session: Any, launch_seen_t: float, last_output_t: float) -> None:
    """A call is one slice of a longer watch: --timeout counts from when the launch was first seen, and a
    silence that began before this call counts toward --stall."""
    m = session.machine
    m.start = min(m.start, launch_seen_t)
    m.last_output = min(m.last_output, last_output_t)
    m.last_moved = m.last_output


def conclude(
    args: Any,
    source: str,
    session: Any,
    recorder: Recorder,
    opened: Opened,
    prev: resume.WaitState | None,
    where: Path,
    outcome: str,
    call_start: float,
    server: resume.ServerMark | None,
    log_path: str | None = None,
    line_base: int = 0,
) -> int:
    """The summary and the standing, printed; the state kept for the next call; the history told once."""
    from bootwatch.commands import outcome_exit_code as _exit_code
    from bootwatch.sinks import history

    now = time.time()
    if outcome == STILL_STARTING:
        summary = session.summary_of(Outcome.INCOMPLETE).to_json()
        summary["outcome"] = STILL_STARTING
    else:
        summary = session.summary(outcome)
    lines = session.analyzer.next_no - 1 + line_base
    state = _next_state(prev, source, opened, session, outcome, call_start, now, lines, server, line_base)
    standing = Standing.build(
        session=session,
        summary=summary,
        state=state,
        prev=prev,
        now=now,
        waited_s=now - call_start,
        etas=recorder.etas,
        notes=recorder.notes,
        log_path=log_path or (source if opened.mark is not None else None),
        server_alive=server_alive(server) if server is not None else None,
    )
    state.last_moved_t = now if standing.moved else state.last_moved_t
    if outcome not in (STILL_STARTING, "interrupted") and not state.recorded:
        history.record(summary, source, "watch" if log_path is None else "run")
        state.recorded = True
    try:
        resume.save(where, state)
    except OSError as e:
        print(f"bootwatch: note: the wait state was not kept in {where} ({e.strerror})", file=sys.stderr)
    with contextlib.suppress(Exception):
        session.sink.close(summary, now)  # the --state file and metrics get their last word
    if args.json:
        obj = {"t": round(now, 3), "event": "summary", "standing": standing.to_json(), **summary}
        sys.stdout.write(json.dumps(redact_obj(obj), ensure_ascii=True) + "\n")
    else:
        sys.stdout.write(render_text(standing) + "\n")
    sys.stdout.flush()
    return exit_code(outcome, _exit_code("interrupted") if outcome == "interrupted" else 0)


def _next_state(
    prev: resume.WaitState | None,
    source: str,
    opened: Opened,
    session: Any,
    outcome: str,
    call_start: float,
    now: float,
    lines: int,
    server: resume.ServerMark | None,
    line_base: int,
) -> resume.WaitState:
    launch_t, phase_t = kept_times(session.analyzer, line_base)
    mark = opened.mark
    if mark is not None:
        offset = opened.offset() if opened.offset is not None else mark.offset
        mark = resume.FileMark(mark.dev, mark.ino, mark.launch_offset, mark.launch_line, offset)
    launch = session.tracker.launch
    cur = launch.current if launch is not None else None
    return resume.WaitState(
        source=source,
        launch_seen_t=prev.launch_seen_t if prev is not None else call_start,
        last_moved_t=prev.last_moved_t if prev is not None else call_start,
        calls=(prev.calls if prev is not None else 0) + 1,
        file=mark,
        server=server,
        lines=lines,
        phase=cur.name if cur is not None else None,
        progress=cur.progress if cur is not None else None,
        outcome=outcome,
        recorded=bool(prev is not None and prev.recorded),
        launch_t=launch_t,
        phase_t=phase_t,
    )


# ---- run --detach --wait-at-most --------------------------------------------------------------------
def make_sink(args: Any, analyzer: Analyzer, source: str) -> Sink:
    """`run --wait-at-most`: quiet while it waits, like `watch --wait-at-most`."""
    return _with_extras(Recorder(json_out=args.json), args, source, analyzer)


def _recorder_of(sink: Any) -> Recorder:
    for s in (sink, getattr(sink, "main", None)):
        if isinstance(s, Recorder):
            return s
    return Recorder()


async def run_started(
    args: Any, session: Any, chunks: Any, server: Any, log_path: Path, offset: Any
) -> tuple[int, bool]:
    """The server `run --detach` started, watched for at most DUR; the state it leaves is the one a later
    `watch LOG --wait-at-most` of the same log resumes from (with the server's pid, so that its death is
    seen). Returns the exit code and whether what is left of the server is to be stopped: only when it
    failed (or a stop signal came); ready, still starting, stalled or late, it runs on."""
    call_start = session.start
    outcome = await _bounded(session, chunks, args.wait_at_most)
    where = state_path(args, parse_source(str(log_path)))
    base = count_lines(log_path, server.start_offset) if server.start_offset else 0
    st = os.stat(log_path)
    mark = resume.FileMark(st.st_dev, st.st_ino, server.start_offset, base + 1, offset())
    try:
        created = psutil.Process(server.pid).create_time()
    except psutil.Error:
        created = 0.0
    from bootwatch.text import redact

    smark = resume.ServerMark(server.pid, created, [redact(a) for a in server.argv])
    opened = Opened(None, mark, False, offset)
    recorder = _recorder_of(session.sink)
    code = conclude(
        args,
        str(log_path),
        session,
        recorder,
        opened,
        None,
        where,
        outcome,
        call_start,
        smark,
        log_path=str(log_path),
        line_base=base,
    )
    return code, outcome in ("failed", "died", "interrupted")


__all__ = ["EXIT_STILL_STARTING", "STILL_STARTING", "Recorder", "conclude", "until", "watch"]
