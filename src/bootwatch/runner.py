"""The one watch/run core. `bootwatch watch/run/replay`, `bootwatch.launch()/watch()`, the pytest plugin and
multi-node watches all come here with a typed config, validated once, and a sink; this module wires the
analyzer, the source, the probe, the insight part and the session, and ends the startup (summary, --then,
history, the sink's close). The CLI and the API only translate their options and map the result.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import shlex
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bootwatch.cluster import Cluster, Node, NodeSink
from bootwatch.errors import UsageError
from bootwatch.guard import Guard, start_guarded
from bootwatch.insight.live import Insight, watch_insight
from bootwatch.opening import Opening, open_source
from bootwatch.pipeline import Analyzer, looks_binary, open_log, rules_for, year_of
from bootwatch.probes.http import HttpProbe
from bootwatch.probes.url import check_url, guess_url
from bootwatch.session import Options, Session
from bootwatch.sinks import history
from bootwatch.sinks.protocol import HandsOver, ServerAware, Sink
from bootwatch.sources.fd_follow import FdFollower
from bootwatch.sources.interrupts import Interrupts
from bootwatch.sources.process import ServerLog, ServerProcess
from bootwatch.sources.protocol import Source
from bootwatch.sources.replay import is_fifo, replay_chunks
from bootwatch.sources.spec import Spec, parse_source
from bootwatch.then import ThenResult, run_then, then_note

INTERRUPTED = "interrupted"  # the outcome when a stop signal ended the watch (its exit code says which)

# The sink a command reports through, made once the analyzers exist: (node names and analyzers, source text).
SinkFor = Callable[[Sequence[tuple[str, Analyzer]], str], Sink]


# ---- configs ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WatchConfig:
    """A watch of one server (one SOURCE, or one server over several nodes) or of several (--each)."""

    sources: tuple[Spec, ...]
    url: str | None = None
    verify: bool = False
    timeout_s: float = 3600.0
    stall_s: float | None = 600.0
    engine: str | None = None
    rules: tuple[str, ...] = ()
    from_start: bool = False
    each: bool = False
    follow: bool = False  # keep following after ready
    # A file whose last launch is already ready: the server as it stands (said READY at once) for a watch that
    # follows it or keeps a probe's state file; else a launch already over, and only a new one is judged.
    attach_ready: bool = False
    pid: int | None = None  # the server's process, for activity while the log is silent
    then: str | None = None
    then_to_stderr: bool = False  # the output is JSON lines: CMD's output goes to stderr, no note
    record: bool = True  # into the history store

    def __post_init__(self) -> None:
        if not self.sources:
            raise UsageError("nothing to watch: give a SOURCE")
        if self.verify and not self.url:
            raise UsageError("--verify needs --url")
        if self.url:
            check_url(self.url)
        if self.then and self.each:
            raise UsageError("--then with --each: run the command after the watch instead")

    @staticmethod
    def specs(texts: Sequence[str]) -> tuple[Spec, ...]:
        return tuple(parse_source(t) for t in texts)

    @property
    def one(self) -> bool:
        return len(self.sources) == 1 and not self.each


@dataclass(frozen=True)
class RunConfig:
    """A server bootwatch starts and watches (`run`, `launch()`, the pytest plugin)."""

    argv: tuple[str, ...]
    url: str | None = None  # the user's: it must answer 200
    log: Path | None = None  # appended; else a new file of its own in log_dir
    log_dir: Path = Path(".")
    timeout_s: float = 3600.0
    stall_s: float | None = 600.0
    verify: bool = False
    engine: str | None = None
    rules: tuple[str, ...] = ()
    detach: bool = False
    keep: bool = False
    then: str | None = None
    then_to_stderr: bool = False
    follow_after_ready: bool = True  # run: follow until the server exits; launch(): hand the server over
    die_with_bootwatch: bool = True
    env: Mapping[str, str] | None = None
    record: bool = True
    probe_url: str | None = field(init=False)  # the URL, given or guessed from --host/--port

    def __post_init__(self) -> None:
        if not self.argv:
            raise UsageError("nothing to run: the command is empty")
        if self.detach and self.then:
            raise UsageError("--detach and --then: choose one (--detach leaves, --then runs CMD and stops the server)")
        url = check_url(self.url) if self.url else guess_url(list(self.argv))
        object.__setattr__(self, "probe_url", url)


@dataclass(frozen=True)
class ReplayConfig:
    log: str
    speed: float = 1.0
    engine: str | None = None
    rules: tuple[str, ...] = ()


@dataclass
class Result:
    """How a watch or a run ended: the outcome (or "interrupted"), the summary the sink closed with, the
    --then command's result when one ran."""

    outcome: str
    summary: dict[str, Any]
    then: ThenResult | None = None
    detached: bool = False  # run --detach: the server runs on
    pid: int | None = None  # the server's, when bootwatch started it
    log_path: Path | None = None


# ---- helpers ------------------------------------------------------------------------------------------
async def until_stopped(coro: Awaitable[str], stop: Interrupts | None) -> str:
    """Run `coro` for its outcome; with `stop` (the CLI's signal handling), a stop signal cancels it and the
    outcome is "interrupted". The API has no `stop`: a Ctrl-C there cancels the caller's task."""
    if stop is None:
        return await coro
    task = asyncio.ensure_future(coro)
    waiter = asyncio.ensure_future(stop.fired.wait())
    try:
        done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return INTERRUPTED
    finally:
        waiter.cancel()


def close_sink(sink: Sink, summary: dict[str, Any], outcome: str) -> None:
    try:
        sink.close(summary, time.time())
    except OSError:
        if outcome != INTERRUPTED:
            raise
        # SIGHUP: the terminal is gone and so is anyone to read the summary; the stop must still happen.


@dataclass
class _Ending:
    """What ending a startup needs besides its summary: the sink, --then, and how to record it."""

    sink: Sink
    then: str | None
    then_to_stderr: bool
    record: Callable[[dict[str, Any]], None]
    server: ServerProcess | None = None
    guard: Guard | None = None


async def _end(end: _Ending, summary: dict[str, Any], outcome: str) -> Result:
    """Ready with --then: CMD runs, then the summary (with `then`) is recorded and written, the last line."""
    if outcome != "ready" or not end.then:
        end.record(summary)
        close_sink(end.sink, summary, outcome)
        return Result(outcome, summary)
    if isinstance(end.sink, HandsOver):  # a live view gives the terminal to CMD before it runs
        end.sink.handover(summary, time.time(), end.then)
    then = await run_then(end.then, end.server, end.guard, to_stderr=end.then_to_stderr)
    summary["then"] = then.to_json()
    note = then_note(then)
    if note and not end.then_to_stderr:
        end.sink.note(time.time(), note)
    end.record(summary)
    close_sink(end.sink, summary, INTERRUPTED if then.interrupted else outcome)
    return Result(outcome, summary, then)


def _no_record(_: dict[str, Any]) -> None:
    return None


# ---- replay ---------------------------------------------------------------------------------------------
async def replay(cfg: ReplayConfig, sink_for: SinkFor, stop: Interrupts | None = None) -> Result:
    if not is_fifo(cfg.log):  # a FIFO is opened once, by the replay (a second open waits for a second writer)
        with open_log(cfg.log) as f:
            if looks_binary(f.read(65536)):
                raise UsageError(f"{cfg.log}: this looks like binary data, not a server log")
    year = year_of(cfg.log)
    analyzer = Analyzer(engine=cfg.engine, rules=list(cfg.rules), year=year)
    sink = sink_for([(cfg.log, analyzer)], cfg.log)
    session = Session(analyzer, sink, Options(timeout_s=math.inf, stall_s=None, replay=True))
    outcome = await until_stopped(session.run(replay_chunks(cfg.log, cfg.speed, year or 2025)), stop)
    summary = session.summary(outcome)
    close_sink(sink, summary, outcome)
    return Result(outcome, summary)


# ---- watch ------------------------------------------------------------------------------------------------
def node_names(specs: Sequence[Spec]) -> list[str]:
    labels = [s.label for s in specs]
    return [lab if labels.count(lab) == 1 else f"node{i + 1}" for i, lab in enumerate(labels)]


@dataclass
class _Watched:
    """One source, opened, and the session that judges it: the per-node core of every watch."""

    name: str
    source: Source
    chunks: AsyncIterator[bytes]
    session: Session

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self.chunks.aclose()  # type: ignore[attr-defined]
        await self.source.aclose()
        if self.session.probe is not None:
            await self.session.probe.close()


def _node_options(cfg: WatchConfig, first: bool, await_new: bool) -> Options:
    """One server over several nodes: the cluster judges time and silence over all of them (a node silent
    while the others move on), the first node (the one serving HTTP) is probed and verified. --each and a
    single source: every node is judged whole."""
    if cfg.one or cfg.each:
        return Options(
            timeout_s=cfg.timeout_s,
            stall_s=cfg.stall_s,
            verify=cfg.verify and cfg.one,
            await_new_launch=await_new,
            follow_after_ready=cfg.follow and cfg.one,
        )
    return Options(timeout_s=math.inf, stall_s=None, verify=cfg.verify and first, await_new_launch=await_new)


def _open_node(cfg: WatchConfig, spec: Spec, name: str, analyzer: Analyzer, sink: Sink, first: bool) -> _Watched:
    opening = Opening(analyzer, sink, from_start=cfg.from_start, rules=cfg.rules, attach_ready=cfg.attach_ready)
    source = open_source(spec, opening)
    probed = cfg.url is not None and first and not cfg.each
    insight = watch_insight(analyzer, cfg.pid) if cfg.one else None
    session = Session(
        analyzer,
        sink,
        _node_options(cfg, first, opening.await_new),
        probe=HttpProbe(cfg.url) if probed and cfg.url else None,
        source=source,
        insight=insight,
        watched=insight.process if insight is not None else None,
    )
    return _Watched(name, source, source.chunks(), session)


def _analyzer(cfg: WatchConfig, spec: Spec) -> Analyzer:
    year = year_of(spec.path) if cfg.one and spec.kind == "file" and Path(spec.path).exists() else None
    return Analyzer(engine=cfg.engine, rules=list(cfg.rules), year=year, clock="arrival")


async def watch(cfg: WatchConfig, sink_for: SinkFor, stop: Interrupts | None = None) -> Result:
    """Follow the sources until the startup (or, --each, every one) is decided."""
    names = node_names(cfg.sources) if not cfg.one else [cfg.sources[0].label]
    analyzers = [_analyzer(cfg, spec) for spec in cfg.sources]
    text = cfg.sources[0].text if cfg.one else ", ".join(s.text for s in cfg.sources)
    sink = sink_for(list(zip(names, analyzers, strict=True)), text)
    watched: list[_Watched] = []
    try:
        for i, (spec, name, analyzer) in enumerate(zip(cfg.sources, names, analyzers, strict=True)):
            node_sink: Sink = sink if cfg.one else NodeSink(sink, name)
            watched.append(_open_node(cfg, spec, name, analyzer, node_sink, i == 0))
        if cfg.one:
            return await _watch_one(cfg, sink, watched[0], stop)
        return await _watch_cluster(cfg, sink, watched, stop)
    finally:
        for w in watched:
            await w.aclose()


async def _watch_one(cfg: WatchConfig, sink: Sink, w: _Watched, stop: Interrupts | None) -> Result:
    outcome = await until_stopped(w.session.run(w.chunks), stop)
    source = cfg.sources[0].text
    record = (lambda s: history.record(s, source, "watch")) if cfg.record else _no_record
    return await _end(_Ending(sink, cfg.then, cfg.then_to_stderr, record), w.session.summary(outcome), outcome)


async def _watch_cluster(cfg: WatchConfig, sink: Sink, watched: list[_Watched], stop: Interrupts | None) -> Result:
    nodes = [Node(w.name, w.session, w.chunks) for w in watched]
    cluster = Cluster(nodes, sink, Options(timeout_s=cfg.timeout_s, stall_s=cfg.stall_s), each=cfg.each)
    outcome = await until_stopped(cluster.run(), stop)

    def record(_: dict[str, Any]) -> None:
        if cfg.record:
            for node in nodes:
                history.record(node.session.summary(node.outcome or outcome), node.name, "watch")

    return await _end(_Ending(sink, cfg.then, cfg.then_to_stderr, record), cluster.summary(outcome), outcome)


# ---- run ----------------------------------------------------------------------------------------------------
class ServerRun:
    """A server bootwatch starts and watches: the part `run`, `launch()` and the pytest plugin share (the log
    file, the guard, the process group, the probe given or guessed, the critical children, and the insight
    part: ETAs from the history, what the process tree does while the log is silent)."""

    def __init__(self, cfg: RunConfig, sink_for: SinkFor, stop: Interrupts | None = None) -> None:
        self.cfg = cfg
        self.sink_for = sink_for
        self.stop = stop
        self.book, _ = rules_for(cfg.rules)
        self.analyzer = Analyzer(engine=cfg.engine, rules=list(cfg.rules), clock="arrival")
        self.analyzer.tracker.hint_command(list(cfg.argv))  # a server that dies on its arguments prints no banner
        self._log: ServerLog | None = None
        self._sink: Sink | None = None
        self._guard: Guard | None = None
        self._server: ServerProcess | None = None
        self._follower: FdFollower | None = None
        self._session: Session | None = None

    # Set by start(): the properties say so to mypy once, instead of an assert at every use.
    @property
    def log(self) -> ServerLog:
        assert self._log is not None, "start() first"
        return self._log

    @property
    def sink(self) -> Sink:
        assert self._sink is not None, "start() first"
        return self._sink

    @property
    def guard(self) -> Guard:
        assert self._guard is not None, "start() first"
        return self._guard

    @property
    def server(self) -> ServerProcess:
        assert self._server is not None, "start() first"
        return self._server

    @property
    def session(self) -> Session:
        assert self._session is not None, "watch() first"
        return self._session

    def start(self) -> bool:
        """Open the log, make the sink and the guard, start the server in its group. False when a stop signal
        came first: nothing was started, the new log file is gone."""
        cfg = self.cfg
        log = ServerLog.open(cfg.log) if cfg.log is not None else ServerLog.create_default(list(cfg.argv), cfg.log_dir)
        try:
            sink = self.sink_for([(str(log.path), self.analyzer)], str(log.path))
            guard = Guard()
        except BaseException:
            log.discard()
            raise
        env = dict(cfg.env) if cfg.env is not None else None
        server = ServerProcess(list(cfg.argv), log, env=env, die_with_bootwatch=cfg.die_with_bootwatch)
        if self.stop is not None and self.stop.signum is not None:
            guard.release()
            log.discard()
            return False
        start_guarded(server, log, guard)
        self._log, self._sink, self._guard, self._server = log, sink, guard, server
        return True

    @property
    def follows(self) -> bool:
        return self.cfg.follow_after_ready and not self.cfg.detach and not self.cfg.then

    async def watch(self) -> str:
        """Until the machine decides (past ready when following): the outcome, or "interrupted"."""
        session, chunks = self.prepare()
        outcome = await until_stopped(session.run(chunks), self.stop)
        if outcome == INTERRUPTED:
            self.server.begin_stop()  # the server hears the Ctrl-C now; the summary is written during its grace
        return outcome

    def prepare(self) -> tuple[Session, AsyncIterator[bytes]]:
        """The session over the server's log, and the chunks it is to read (watch() runs it to its end)."""
        cfg, server, sink = self.cfg, self.server, self.sink
        sink.note(time.time(), f"started pid {server.pid}: {shlex.join(server.argv)}  (log: {self.log.path})")
        if isinstance(sink, ServerAware):  # the probe's state file names the server's pid
            sink.set_server(server.pid)
        self._follower = FdFollower(self.log.read_fd, start=server.start_offset)
        self.analyzer.next_no = self.log.lines_before + 1  # an existing log: its own line numbers, as `report` says
        opts = Options(
            timeout_s=cfg.timeout_s,
            stall_s=cfg.stall_s,
            verify=cfg.verify,
            follow_after_ready=self.follows,
            critical=self.book.processes,
            probe_required=cfg.url is not None,
        )
        self._session = Session(
            self.analyzer,
            sink,
            opts,
            probe=HttpProbe(cfg.probe_url) if cfg.probe_url else None,
            server=server,
            source=self._follower,
            insight=Insight(self.analyzer.tracker, server.tree, server.argv),
        )
        return self._session, self._follower.chunks()

    def log_offset(self) -> int:
        """How far into the log file the session has read."""
        return self._follower.offset if self._follower is not None else self.server.start_offset

    @property
    def probe_url(self) -> str | None:
        """The health URL that was probed (given, guessed from --port, or read from the log)."""
        probe = self._session.probe if self._session is not None else None
        return probe.url if probe is not None else self.cfg.probe_url

    async def close_watch(self) -> None:
        if self._follower is not None:
            self._follower.close()
        if self._session is not None and self._session.probe is not None:
            await self._session.probe.close()

    def record(self, summary: dict[str, Any]) -> None:
        if self.cfg.record:
            history.record(summary, str(self.log.path), "run")

    async def end(self, outcome: str) -> tuple[Result, bool]:
        """The summary, --then, the history and the sink's close; and whether the server is to be stopped."""
        cfg = self.cfg
        summary = self.session.summary(outcome)
        if outcome == "ready" and cfg.detach:
            self.record(summary)
            close_sink(self.sink, summary, outcome)
            return Result(outcome, summary, detached=True, pid=self.server.running_pid(), log_path=self.log.path), False
        if outcome == "ready" and cfg.then:
            ending = _Ending(self.sink, cfg.then, cfg.then_to_stderr, self.record, self.server, self.guard)
            result = await _end(ending, summary, outcome)
            # --keep keeps a running server; what is left of one that died (its children) goes.
            signalled = self.stop is not None and self.stop.signum is not None
            return result, not cfg.keep or signalled or self.server.ended() is not None
        result = await _end(_Ending(self.sink, None, False, self.record), summary, outcome)
        return result, not (cfg.keep and outcome in ("stalled", "timeout"))

    async def stop_server(self) -> int | None:
        return await self.server.stop(self.stop)

    def release(self, always: bool = True) -> None:
        """Let the guard go (unless the group may still run: then the guard stops it when we exit)."""
        if always or not self.server.group_alive():
            self.guard.release()
        self.log.close()


T = TypeVar("T")
Body = Callable[[ServerRun], Awaitable[tuple[T, bool]]]  # what is done with a started server; stop it after?


async def _watch_and_end(r: ServerRun) -> tuple[Result, bool]:
    return await r.end(await r.watch())


async def run(cfg: RunConfig, sink_for: SinkFor, stop: Interrupts | None = None) -> Result | None:
    """`bootwatch run`: start, watch, end; the server is stopped unless --detach or --keep says otherwise.
    None when a stop signal came before the server started."""
    return await run_with(cfg, sink_for, _watch_and_end, stop)


async def run_with(cfg: RunConfig, sink_for: SinkFor, body: Body[T], stop: Interrupts | None = None) -> T | None:
    """Start the server, do `body` with it, stop it if `body` says so; the guard is let go only once the
    group is known to be stopped (or meant to run on). None when a stop signal came before the start."""
    r = ServerRun(cfg, sink_for, stop)
    if not r.start():
        return None
    release_guard = True
    try:
        stop_server = True
        try:
            result, stop_server = await body(r)
            return result
        finally:
            await r.close_watch()
            if stop_server:
                await r.stop_server()
    except BaseException:
        release_guard = False  # the stop above may not have happened: the guard stops the group when we exit
        raise
    finally:
        r.release(release_guard)
