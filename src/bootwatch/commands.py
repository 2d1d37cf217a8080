"""The live commands (watch, run, replay): wire a source, probes, the session and a sink."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from bootwatch.analyze import Analyzer, analyze_file, launch_marker, looks_binary, open_log, rules_for, year_of
from bootwatch.cluster import Cluster, Node, NodeSink
from bootwatch.errors import UsageError
from bootwatch.probes.http import HttpProbe
from bootwatch.session import EXIT, Options, Session
from bootwatch.sinks import history
from bootwatch.sinks.events import JsonSink, PlainSink
from bootwatch.sources.container import ContainerFollower
from bootwatch.sources.file import FileFollower, last_launch_offset
from bootwatch.sources.process import ServerProcess
from bootwatch.sources.replay import replay_chunks
from bootwatch.sources.spec import Spec, parse_source
from bootwatch.sources.ssh import SshFollower


def make_sink(args: Any, analyzers: list[tuple[str, Analyzer]], source: str) -> Any:
    if args.json:
        return JsonSink()
    if sys.stdout.isatty():
        from bootwatch.sinks.live_view import LiveSink

        return LiveSink([name for name, _ in analyzers], source, Console(highlight=False))
    return PlainSink(source=source)


async def _with_interrupt(coro: Any) -> str:
    """Run `coro` for its outcome; Ctrl-C (SIGINT) or SIGTERM cancels it: the outcome is "interrupted"."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    task = asyncio.ensure_future(coro)
    waiter = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return "interrupted"
    finally:
        waiter.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _finish(session: Session, sink: Any, outcome: str, record_as: tuple[str, str] | None = None) -> int:
    summary = session.summary(outcome)
    sink.close(summary, time.time())
    if record_as is not None:
        history.record(summary, *record_as)
    return EXIT.get(outcome, 1)


# ---- replay ---------------------------------------------------------------------------------------
async def replay(args: Any) -> int:
    with open_log(args.log) as f:
        if looks_binary(f.read(65536)):
            raise UsageError(f"{args.log}: this looks like binary data, not a server log")
    year = year_of(args.log)
    analyzer = Analyzer(engine=args.engine, rules=args.rules, year=year)
    sink = make_sink(args, [(args.log, analyzer)], args.log)
    session = Session(analyzer, sink, Options(timeout_s=float("inf"), stall_s=None, replay=True))
    outcome = await _with_interrupt(session.run(replay_chunks(args.log, args.speed, year or 2025)))
    return _finish(session, sink, outcome)


# ---- watch ----------------------------------------------------------------------------------------
def _catch_up(path: Path, analyzer: Analyzer, start: int) -> int:
    """Read what the file already holds (from `start`) up to its last complete line; returns where it ended.
    Its events are not kept (a 1 GB history would hold a million); `Tracker.snapshot` says where it stands."""
    with path.open("rb") as f:
        f.seek(start)
        fed, _ = analyze_file(f, analyzer, str(path), complete_only=True, clock=time.time)
    return start + fed


@dataclass
class Followed:
    """A source, opened: its chunks, how many bytes it has read, what death it saw, how to close it."""

    chunks: AsyncIterator[bytes]
    bytes_read: Callable[[], int]
    death: Callable[[], Any] | None
    close: Callable[[], Any]  # may return an awaitable (reaping a client process)
    await_new: bool = False

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self.chunks.aclose()  # type: ignore[attr-defined]
        result = self.close()
        if asyncio.iscoroutine(result):
            await result


def _open_source(spec: Spec, analyzer: Analyzer, sink: Any, args: Any) -> Followed:
    note = lambda text: sink.note(time.time(), text)  # noqa: E731
    if spec.kind == "ssh":
        ssh = SshFollower(spec, note=note)
        return Followed(ssh.chunks(), lambda: ssh.offset, None, ssh.aclose)
    if spec.kind in ("docker", "k8s"):
        c = ContainerFollower(spec, note=note)
        return Followed(c.chunks(), lambda: c.offset, lambda: c.death, c.aclose)
    path = Path(spec.path)
    if path.is_dir():
        raise UsageError(f"{path}: is a directory, not a log file")
    start, await_new = 0, False
    if path.exists():
        begin = 0 if args.from_start else last_launch_offset(path, launch_marker(args.rules))
        start = _catch_up(path, analyzer, begin)
        await_new = not args.from_start and analyzer.tracker.verdict() in ("ready", "failed")
        if await_new:
            sink.note(time.time(), f"the last launch in {spec.text} already ended ({analyzer.tracker.verdict()}); "
                      "waiting for a new launch")
        else:
            for ev in analyzer.tracker.snapshot():  # what the current launch went through before we looked
                sink.event(ev, time.time())
    follower = FileFollower(path, start=start)
    return Followed(follower.chunks(), lambda: follower.offset, None, follower.close, await_new)


def _names(specs: list[Spec]) -> list[str]:
    labels = [s.label for s in specs]
    return [lab if labels.count(lab) == 1 else f"node{i + 1}" for i, lab in enumerate(labels)]


async def watch(args: Any) -> int:
    specs = [parse_source(s) for s in args.sources]
    if args.verify and not args.url:
        raise UsageError("--verify needs --url")
    if len(specs) == 1 and not args.each:
        return await _watch_one(specs[0], args)
    if args.then and args.each:
        raise UsageError("--then with --each: run the command after the watch instead")
    names = _names(specs)
    analyzers = [Analyzer(engine=args.engine, rules=args.rules, clock="arrival") for _ in specs]
    sink = make_sink(args, list(zip(names, analyzers, strict=False)), ", ".join(args.sources))
    nodes: list[Node] = []
    opened: list[Followed] = []
    try:
        for i, (spec, name, analyzer) in enumerate(zip(specs, names, analyzers, strict=False)):
            node_sink = NodeSink(sink, name)
            f = _open_source(spec, analyzer, node_sink, args)
            opened.append(f)
            probe = HttpProbe(args.url) if args.url and i == 0 and not args.each else None
            if args.each:
                opts = Options(timeout_s=args.timeout, stall_s=args.stall, await_new_launch=f.await_new)
            else:
                opts = Options(timeout_s=float("inf"), stall_s=None, verify=args.verify and i == 0,
                               await_new_launch=f.await_new)
            session = Session(analyzer, node_sink, opts, probe=probe, source_bytes=f.bytes_read, source_death=f.death)
            nodes.append(Node(name, session, f.chunks))
        cluster = Cluster(nodes, sink, Options(timeout_s=args.timeout, stall_s=args.stall), each=args.each)
        outcome = await _with_interrupt(cluster.run())
        summary = cluster.summary(outcome)
        sink.close(summary, time.time())
        for node in nodes:
            history.record(node.session.summary(node.outcome or outcome), node.name, "watch")
        if outcome == "ready" and args.then:
            return await _run_then(args.then, None)
        return EXIT.get(outcome, 1)
    finally:
        for f in opened:
            await f.aclose()
        for node in nodes:
            if node.session.probe is not None:
                await node.session.probe.close()


async def _watch_one(spec: Spec, args: Any) -> int:
    path_year = year_of(spec.path) if spec.kind == "file" and Path(spec.path).exists() else None
    analyzer = Analyzer(engine=args.engine, rules=args.rules, year=path_year, clock="arrival")
    sink = make_sink(args, [(spec.label, analyzer)], spec.text)
    f = _open_source(spec, analyzer, sink, args)
    probe = HttpProbe(args.url) if args.url else None
    opts = Options(timeout_s=args.timeout, stall_s=args.stall, verify=args.verify, await_new_launch=f.await_new)
    session = Session(analyzer, sink, opts, probe=probe, source_bytes=f.bytes_read, source_death=f.death)
    try:
        outcome = await _with_interrupt(session.run(f.chunks))
        code = _finish(session, sink, outcome, (spec.text, "watch"))
        if outcome == "ready" and args.then:
            return await _run_then(args.then, None)
        return code
    finally:
        await f.aclose()
        if probe is not None:
            await probe.close()


async def _run_then(cmd: str, server: ServerProcess | None) -> int:
    """Run CMD through the shell once ready; its exit code, or 1 if the server died meanwhile."""
    proc = await asyncio.create_subprocess_shell(cmd)
    died = False
    while True:
        try:
            rc = await asyncio.wait_for(proc.wait(), 0.25)
            break
        except TimeoutError:
            pass
        if server is not None and server.poll() is not None:
            died = True
    return 1 if died else rc


# ---- run ------------------------------------------------------------------------------------------
_PORT_FLAGS = ("--port", "-p", "--server-port")
_HOST_FLAGS = ("--host", "--hostname")


def guess_url(argv: list[str]) -> str | None:
    """The health URL from the server's own command line (--host/--port), if it names a port."""
    host, port = "127.0.0.1", None
    for i, a in enumerate(argv):
        for flags, setter in ((_PORT_FLAGS, "port"), (_HOST_FLAGS, "host")):
            for fl in flags:
                val = None
                if a == fl and i + 1 < len(argv):
                    val = argv[i + 1]
                elif a.startswith(fl + "="):
                    val = a.split("=", 1)[1]
                if val is not None:
                    if setter == "port" and val.isdigit():
                        port = int(val)
                    elif setter == "host":
                        host = val
    if port is None:
        return None
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return f"http://{host}:{port}/health"


def default_log_path(argv: list[str]) -> Path:
    name = Path(argv[0]).name or "server"
    return Path(f"bootwatch-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}-{time.strftime('%Y%m%d-%H%M%S')}.log")


async def run(args: Any) -> int:
    argv = list(args.server_command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise UsageError("nothing to run: give the server's command after --")
    log_path = Path(args.log) if args.log else default_log_path(argv)
    book, _ = rules_for(args.rules)
    server = ServerProcess(argv, log_path)
    url = args.url or guess_url(argv)
    analyzer = Analyzer(engine=args.engine, rules=args.rules, clock="arrival")
    sink = make_sink(args, [(str(log_path), analyzer)], str(log_path))
    server.start()
    sink.note(time.time(), f"started pid {server.pid}: {shlex.join(argv)}  (log: {log_path})")
    probe = HttpProbe(url) if url else None
    follower = FileFollower(log_path, start=server.start_offset)
    follow = not args.detach and not args.then
    opts = Options(timeout_s=args.timeout, stall_s=args.stall, verify=args.verify, follow_after_ready=follow,
                   critical=book.processes, probe_required=bool(args.url))
    session = Session(analyzer, sink, opts, probe=probe, server=server, source_bytes=lambda: follower.offset)
    stop_server = True
    try:
        outcome = await _with_interrupt(session.run(follower.chunks()))
        if outcome == "ready" and args.detach:
            stop_server = False
            code = _finish(session, sink, "ready", (str(log_path), "run"))
            print(f"server pid {server.pid} runs on; log: {log_path}", file=sys.stderr if args.json else sys.stdout)
            return code
        if outcome == "ready" and args.then:
            _finish(session, sink, "ready", (str(log_path), "run"))
            rc = await _run_then(args.then, server)
            stop_server = not args.keep
            return rc
        if args.keep and outcome in ("stalled", "timeout"):
            stop_server = False
        return _finish(session, sink, outcome, (str(log_path), "run"))
    finally:
        follower.close()
        if session.probe is not None:
            await session.probe.close()
        if stop_server:
            await server.stop()
