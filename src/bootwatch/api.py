"""bootwatch as a library: launch a server and wait until it is truly ready, watch one that starts elsewhere,
or analyse a log; a failed start raises a typed exception that carries the root cause, not a bare timeout.

    with bootwatch.launch(["llama-server", "-m", "tiny.gguf", "--port", "8080"]) as server:
        httpx.get(f"{server.base_url}/v1/models")

    async with bootwatch.launch("vllm serve facebook/opt-125m --port 8000", verify=True) as server:
        ...

The same core as `bootwatch run` (runner.ServerRun; `watch` is runner.watch): the server's output goes to
a log file, its whole process group is stopped on the way out (and by the guard process if this Python
process is killed), a death explains itself from the log, and the startup gets the same ETAs and "it
moves" activity while its log is silent.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import math
import os
import shlex
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from bootwatch.durations import parse_duration, positive_seconds
from bootwatch.errors import UsageError
from bootwatch.pipeline import analyze_path
from bootwatch.runner import RunConfig, ServerRun, WatchConfig
from bootwatch.runner import watch as run_watch
from bootwatch.sinks.protocol import Sink
from bootwatch.sources.process import ServerProcess
from bootwatch.sources.stopping import run_to_the_end
from bootwatch.tracker import Event, LineEvent
from bootwatch.tracker.verdict import Verdict

T = TypeVar("T")
Duration = float | int | str  # seconds, or "90s", "15m", "1h"
EventHook = Callable[[Event], None]

DEFAULT_TIMEOUT: Duration = "30m"
DEFAULT_STALL: Duration = "10m"


# ---- what a startup came to ------------------------------------------------------------------------
@dataclass(frozen=True)
class Report:
    """A startup's summary: the SPEC's JSON object (`raw`) with typed accessors for what callers use most."""

    raw: dict[str, Any]

    @property
    def verdict(self) -> Verdict:
        return Verdict(self.raw["verdict"])

    @property
    def engine(self) -> str:
        return str(self.raw.get("engine") or "unknown")

    @property
    def root_cause(self) -> str | None:
        """The one line that explains a failure (`failure.text`), or None."""
        f = self.raw.get("failure")
        return str(f["text"]) if f and f.get("text") else None

    @property
    def category(self) -> str | None:
        f = self.raw.get("failure")
        return str(f.get("category")) if f and f.get("category") else None

    @property
    def phase(self) -> str | None:
        """The phase the startup was in when it ended (`ready` once ready)."""
        phases = self.raw.get("phases") or []
        return str(phases[-1]["name"]) if phases else None

    @property
    def phases(self) -> list[dict[str, Any]]:
        return list(self.raw.get("phases") or [])

    @property
    def time_to_ready_s(self) -> float | None:
        """The verdict machine's time to ready (on the log's clock when the log has one); None unless ready."""
        value = self.raw.get("time_to_ready_s")
        return float(value) if isinstance(value, int | float) and self.verdict is Verdict.READY else None

    @property
    def outcome(self) -> str:
        """How the watch ended, as the verdict machine decided it (`ready`, `failed`, `died`, `stopped`, ...)."""
        return str(self.raw.get("outcome") or "starting")

    def text(self, source: str = "") -> str:
        """The summary as `bootwatch report` prints it (verdict, root cause, phase table), without colour."""
        from rich.console import Console

        from bootwatch.sinks.summary_text import render

        out = io.StringIO()
        render(self.raw, source, Console(file=out, highlight=False, soft_wrap=True, no_color=True, width=120))
        return out.getvalue().rstrip() + "\n"


class ServerError(Exception):
    """A server did not become ready. `report` holds bootwatch's summary, `log_path` the server's log."""

    def __init__(self, message: str, report: Report, log_path: Path | None) -> None:
        super().__init__(message)
        self.report = report
        self.log_path = log_path

    @property
    def summary(self) -> dict[str, Any]:
        return self.report.raw

    @property
    def phase(self) -> str | None:
        return self.report.phase

    def details(self) -> str:
        """What a test report needs, in a dozen lines: the message, the phase table (where it died) and where
        the log is; `report.text()` has the whole summary."""
        from bootwatch.durations import fmt_duration

        rows = [f"{self}"]
        phases = self.report.phases
        for i, p in enumerate(phases):
            name = ("draft " if p.get("draft") else "") + str(p.get("name"))
            mark = "  <- died here" if i == len(phases) - 1 and self.report.verdict is not Verdict.READY else ""
            rows.append(f"  {name:<20} {fmt_duration(p.get('duration_s')):>8}{mark}")
        if self.log_path is not None:
            rows.append(f"log: {self.log_path}")
        return "\n".join(rows) + "\n"


class ServerFailed(ServerError):
    """The server died or said it cannot start: `root_cause` is the log line that explains it."""

    @property
    def root_cause(self) -> str | None:
        return self.report.root_cause

    @property
    def category(self) -> str | None:
        return self.report.category


class ServerStalled(ServerError):
    """The server went silent too long in its phase, with no sign of progress."""


class ServerTimeout(ServerError):
    """The server was still starting (alive, not known to be stuck) when the timeout came."""


class ServerIncomplete(ServerError):
    """The log ended, or the watch was stopped, before any verdict (a watched source that went away)."""


def raise_for(report: Report, log_path: Path | None, what: str = "the server") -> None:
    """Nothing when ready; else the typed exception for the verdict."""
    v = report.verdict
    if v is Verdict.READY:
        return
    # The message leads with what people call the server and the cause: a test report's short summary keeps
    # only its first few dozen characters ("SGLang failed in cuda_graph: torch.OutOfMemoryError: ...").
    known = report.engine != "unknown" and report.raw.get("engine_display")
    what = str(known) if known else what
    phase = f" in {report.phase}" if report.phase else ""
    where = f" (log: {log_path})" if log_path is not None else ""
    if v is Verdict.FAILED:
        cause = report.root_cause or "no line in the log explains it"
        raise ServerFailed(f"{what} failed{phase}: {cause}{where}", report, log_path)
    if v is Verdict.STALLED:
        raise ServerStalled(f"{what} stalled{phase}{where}", report, log_path)
    if v is Verdict.TIMEOUT:
        raise ServerTimeout(f"{what} was not ready before the timeout, still{phase}{where}", report, log_path)
    raise ServerIncomplete(f"{what} ended with no verdict{phase}{where}", report, log_path)


def _seconds(value: Duration | None, what: str) -> float | None:
    """Seconds from a number or a duration text, checked as the command line checks --timeout and --stall
    ("0" is refused as 0 is: it must never fall through to "no timeout")."""
    if value is None:
        return None
    if isinstance(value, str):
        return positive_seconds(parse_duration(value), what)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f'{what} {value!r}: give seconds (a number) or a duration such as "15m"')
    return positive_seconds(float(value), what)


def _timeout(value: Duration | None) -> float:
    seconds = _seconds(value, "timeout")
    return math.inf if seconds is None else seconds


def display_name(argv: Sequence[str]) -> str:
    """What a person calls the server: past `env VAR=value`, a Python's `-m module`."""
    rest = list(argv)
    if rest and Path(rest[0]).name == "env":
        rest = rest[1:]
        while rest and ("=" in rest[0] or rest[0].startswith("-")):
            rest = rest[1:]
    if not rest:
        return Path(argv[0]).name if argv else "server"
    if Path(rest[0]).name.startswith("python") and "-m" in rest[:-1]:
        return rest[rest.index("-m") + 1]
    return Path(rest[0]).name


def _argv(cmd: str | Sequence[str]) -> list[str]:
    try:
        argv = shlex.split(cmd) if isinstance(cmd, str) else [str(a) for a in cmd]
    except ValueError as e:  # "No closing quotation": the caller's mistake, not bootwatch's
        raise UsageError(f"the command {cmd!r} cannot be split as a shell would: {e}") from None
    if not argv:
        raise UsageError("nothing to run: the command is empty")
    return argv


# ---- the sink the library watches through -----------------------------------------------------------
class _Collector:
    """Keeps the events of one startup; hands each to the caller's hook and any further sink."""

    def __init__(self, hook: EventHook | None, extra: Iterable[Sink] = ()) -> None:
        self.events: list[Event] = []
        self.notes: list[str] = []
        self.hook = hook
        self.extra = list(extra)

    def event(self, ev: Event, now: float) -> None:
        if not isinstance(ev, LineEvent):  # live views only
            self.events.append(ev)
        if self.hook is not None:
            self.hook(ev)
        for s in self.extra:
            s.event(ev, now)

    def note(self, now: float, text: str) -> None:
        self.notes.append(text)
        for s in self.extra:
            s.note(now, text)

    def close(self, summary: dict[str, Any], now: float) -> None:
        for s in self.extra:
            s.close(summary, now)


# ---- the running server --------------------------------------------------------------------------
@dataclass
class Server:
    """A server `launch` started and saw ready. It is stopped when the `with` block ends."""

    argv: list[str]
    pid: int
    url: str | None  # the health URL that answered (given, guessed from --port, or read from the log)
    log_path: Path
    report: Report
    events: list[Event] = field(default_factory=list)
    _process: ServerProcess | None = field(default=None, repr=False)

    @property
    def summary(self) -> dict[str, Any]:
        """The SPEC's summary of the startup (verdict, phases, facts, warnings...)."""
        return self.report.raw

    @property
    def base_url(self) -> str | None:
        """scheme://host:port of `url`, for API calls."""
        if self.url is None:
            return None
        from urllib.parse import urlsplit

        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"

    def alive(self) -> bool:
        """Still running (a launcher that exited 0 with the server in the background: while the server runs)."""
        return self._process is not None and self._process.ended() is None

    def exit_code(self) -> int | None:
        """The server's exit status once it ended (negative: killed by that signal), else None."""
        return self._process.ended() if self._process is not None else None

    def analyze(self) -> Report:
        """The log read again now: after readiness a crash shows as `runtime_failure`."""
        return Report(analyze_path(self.log_path))


class _LoopThread:
    """An event loop of its own in a thread, for the synchronous API: it works whatever the caller's thread
    does (even inside a running loop). The server is forked from this thread and the thread lives as long as
    the server: PR_SET_PDEATHSIG follows the thread that forked, not the process."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="bootwatch-launch", daemon=True)
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        # Ctrl-C while waiting cancels the coroutine, whose cleanup stops the server; a further Ctrl-C hurries
        # that stop to its next step, and the wait lasts until the stop has ended (sources/stopping.py).
        return run_to_the_end(self.loop, coro)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


class Launch:
    """The context manager `launch` returns: `with` (blocking) or `async with` (on the running loop)."""

    def __init__(
        self,
        cmd: str | Sequence[str],
        *,
        log: str | os.PathLike[str] | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        url: str | None = None,
        timeout: Duration = DEFAULT_TIMEOUT,
        stall: Duration | None = DEFAULT_STALL,
        verify: bool = False,
        engine: str | None = None,
        rules: Iterable[str | os.PathLike[str]] = (),
        env: dict[str, str] | None = None,
        on_event: EventHook | None = None,
        sinks: Iterable[Sink] = (),
        record: bool = False,
    ) -> None:
        self.argv = _argv(cmd)
        self.config = RunConfig(
            tuple(self.argv),
            url=url,
            log=Path(log) if log is not None else None,
            log_dir=Path(log_dir) if log_dir is not None else Path(tempfile.gettempdir()),
            timeout_s=_timeout(timeout),
            stall_s=_seconds(stall, "stall"),
            verify=verify,
            engine=engine,
            rules=tuple(str(r) for r in rules),
            follow_after_ready=False,  # ready: the server is the caller's until the block ends
            env=env,
            record=record,
        )
        self.on_event = on_event
        self.sinks = list(sinks)
        self._run: ServerRun | None = None
        self._stopped = False
        self._thread: _LoopThread | None = None
        self.server: Server | None = None

    # ---- the startup, on whichever loop runs it (runner.ServerRun: what `bootwatch run` does) ---------
    async def _start(self) -> Server:
        sink = _Collector(self.on_event, self.sinks)
        r = ServerRun(self.config, lambda _analyzers, _source: sink)
        r.start()
        self._run = r
        try:
            outcome = await r.watch()
            summary = r.session.summary(outcome)
        except BaseException:
            with contextlib.suppress(asyncio.CancelledError):  # a repeat cancellation only hurried the stop
                await self._stop()
            raise
        finally:
            await r.close_watch()
        try:
            sink.close(summary, time.time())  # a user sink's close() may raise: no server left running behind
            r.record(summary)
        except BaseException:
            with contextlib.suppress(asyncio.CancelledError):
                await self._stop()
            raise
        report = Report(summary)
        if report.verdict is not Verdict.READY:
            await self._stop()
            raise_for(report, r.log.path, display_name(self.argv))
        self.server = Server(self.argv, r.server.pid, r.probe_url, r.log.path, report, sink.events, r.server)
        return self.server

    async def _stop(self) -> None:
        r = self._run
        if r is None or self._stopped:
            return
        try:
            await r.stop_server()
        finally:
            self._stopped = True
            r.release(always=False)  # a stop that did not end: the guard stops the group when we exit

    # ---- async with -------------------------------------------------------------------------------
    async def __aenter__(self) -> Server:
        return await self._start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stop()

    # ---- with -------------------------------------------------------------------------------------
    def __enter__(self) -> Server:
        self._thread = _LoopThread()
        try:
            return self._thread.call(self._start())
        except BaseException:
            self._thread.close()
            self._thread = None
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._thread is None:
            return
        try:
            self._thread.call(self._stop())
        finally:
            self._thread.close()
            self._thread = None


def launch(
    cmd: str | Sequence[str],
    *,
    log: str | os.PathLike[str] | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    url: str | None = None,
    timeout: Duration = DEFAULT_TIMEOUT,
    stall: Duration | None = DEFAULT_STALL,
    verify: bool = False,
    engine: str | None = None,
    rules: Iterable[str | os.PathLike[str]] = (),
    env: dict[str, str] | None = None,
    on_event: EventHook | None = None,
    sinks: Iterable[Sink] = (),
    record: bool = False,
) -> Launch:
    """Start `cmd` (a list, or a string split as a shell would) and wait until it is ready.

    Use it as `with launch(...) as server:` or `async with launch(...) as server:`; the server (its whole
    process group) is stopped when the block ends. Its output goes to `log` (appended), or to a new file in
    `log_dir` (default: the temporary directory). `url` is the health URL to probe; without it bootwatch
    probes the one the command's --host/--port name, or the port the log announces. `timeout` and `stall`
    are seconds or durations such as "15m" (`stall=None`: never). `verify` asks for one completion before
    ready counts. `on_event` sees every event as it happens; `record` adds the startup to the history store.

    Raises ServerFailed (with `root_cause`, `phase`, `log_path`), ServerStalled or ServerTimeout; and
    UsageError, before anything starts, for a bad argument (an empty command, a bad URL or duration).
    """
    return Launch(
        cmd,
        log=log,
        log_dir=log_dir,
        url=url,
        timeout=timeout,
        stall=stall,
        verify=verify,
        engine=engine,
        rules=rules,
        env=env,
        on_event=on_event,
        sinks=sinks,
        record=record,
    )


# ---- watch and analyze ---------------------------------------------------------------------------
async def watch_async(
    source: str | os.PathLike[str],
    *,
    url: str | None = None,
    timeout: Duration = DEFAULT_TIMEOUT,
    stall: Duration | None = DEFAULT_STALL,
    verify: bool = False,
    engine: str | None = None,
    rules: Iterable[str | os.PathLike[str]] = (),
    from_start: bool = False,
    on_event: EventHook | None = None,
    sinks: Iterable[Sink] = (),
) -> Report:
    """Follow a server that starts elsewhere (a log file, ssh://, docker://, k8s://) until it is ready; the
    summary when it is, else the typed exception (ServerFailed, ServerStalled, ServerTimeout)."""
    cfg = WatchConfig(
        WatchConfig.specs([str(source)]),
        url=url,
        verify=verify,
        timeout_s=_timeout(timeout),
        stall_s=_seconds(stall, "stall"),
        engine=engine,
        rules=tuple(str(r) for r in rules),
        from_start=from_start,
        record=False,
    )
    sink = _Collector(on_event, sinks)
    result = await run_watch(cfg, lambda _analyzers, _source: sink)
    report = Report(result.summary)
    spec = cfg.sources[0]
    raise_for(report, Path(spec.path) if spec.kind == "file" else None, spec.text)
    return report


def watch(
    source: str | os.PathLike[str],
    *,
    url: str | None = None,
    timeout: Duration = DEFAULT_TIMEOUT,
    stall: Duration | None = DEFAULT_STALL,
    verify: bool = False,
    engine: str | None = None,
    rules: Iterable[str | os.PathLike[str]] = (),
    from_start: bool = False,
    on_event: EventHook | None = None,
    sinks: Iterable[Sink] = (),
) -> Report:
    """`watch_async`, blocking (on a loop of its own, so it works inside a running loop's thread too)."""
    runner = _LoopThread()
    try:
        return runner.call(
            watch_async(
                source,
                url=url,
                timeout=timeout,
                stall=stall,
                verify=verify,
                engine=engine,
                rules=rules,
                from_start=from_start,
                on_event=on_event,
                sinks=sinks,
            )
        )
    finally:
        runner.close()


def analyze(
    path: str | os.PathLike[str],
    *,
    engine: str | None = None,
    rules: Iterable[str | os.PathLike[str]] = (),
    exhaustive: bool = False,
) -> Report:
    """`bootwatch report` as a call: the summary of the last launch in the log. Never raises for a verdict;
    UsageError when the file cannot be read as a log."""
    return Report(analyze_path(path, engine=engine, rules=[str(r) for r in rules], exhaustive=exhaustive))


__all__ = [
    "Launch",
    "Report",
    "Server",
    "ServerError",
    "ServerFailed",
    "ServerIncomplete",
    "ServerStalled",
    "ServerTimeout",
    "UsageError",
    "analyze",
    "launch",
    "raise_for",
    "watch",
    "watch_async",
]
