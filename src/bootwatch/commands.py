"""The live commands (watch, run, replay): wire a source, probes, the session and a sink."""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rich.console import Console

from bootwatch.cluster import Cluster, Node, NodeSink
from bootwatch.errors import UsageError
from bootwatch.guard import Guard, start_guarded
from bootwatch.insight.live import Insight, watch_insight
from bootwatch.pipeline import (
    Analyzer,
    analyze_file,
    count_lines,
    launch_marker,
    looks_binary,
    open_log,
    rules_for,
    year_of,
)
from bootwatch.probes.http import HttpProbe
from bootwatch.session import Options, Session
from bootwatch.sinks import history
from bootwatch.sinks.events import JsonSink, PlainSink
from bootwatch.sources.container import ContainerFollower
from bootwatch.sources.fd_follow import FdFollower
from bootwatch.sources.file import FileFollower, Kind, check_path, last_launch_offset
from bootwatch.sources.interrupts import Interrupts, interrupts
from bootwatch.sources.process import ServerLog, ServerProcess, describe_exit, die_with_parent, stop_process_group
from bootwatch.sources.replay import is_fifo, replay_chunks
from bootwatch.sources.spec import Spec, parse_source
from bootwatch.sources.ssh import SshFollower
from bootwatch.text import redact, shown
from bootwatch.tracker.verdict import EXIT


def make_sink(args: Any, analyzers: list[tuple[str, Analyzer]], source: str) -> Any:
    sink = _user_sink(args, analyzers, source)
    if getattr(args, "metrics_port", None) is None and not getattr(args, "state", None):
        return sink
    from bootwatch.sinks.metrics import with_extras  # prometheus_client only when asked for

    return with_extras(sink, args, source, analyzers[0][1].tracker if len(analyzers) == 1 else None)


def _user_sink(args: Any, analyzers: list[tuple[str, Analyzer]], source: str) -> Any:
    if args.json:
        return JsonSink()
    if sys.stdout.isatty():
        from bootwatch.sinks.live_view import LiveSink

        console = Console(highlight=False)
        if LiveSink.fits(console):  # a terminal too small for the view gets the plain lines
            return LiveSink([name for name, _ in analyzers], source, console)
    return PlainSink(source=source)


async def _with_interrupt(coro: Any) -> str:
    """Run `coro` for its outcome; a stop signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) cancels it: the outcome
    is "interrupted", and the exit code says which signal (sources/interrupts.py)."""
    fired = interrupts().fired
    task = asyncio.ensure_future(coro)
    waiter = asyncio.ensure_future(fired.wait())
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


def _exit_code(outcome: str) -> int:
    return interrupts().exit_code if outcome == "interrupted" else EXIT.get(outcome, 1)


def _close(sink: Any, summary: dict[str, Any], outcome: str) -> None:
    try:
        sink.close(summary, time.time())
    except OSError:
        if outcome != "interrupted":
            raise
        # SIGHUP: the terminal is gone and so is anyone to read the summary; the stop must still happen.


def _finish(session: Session, sink: Any, outcome: str, record_as: tuple[str, str] | None = None) -> int:
    summary = session.summary(outcome)
    if record_as is not None:
        history.record(summary, *record_as)
    _close(sink, summary, outcome)
    return _exit_code(outcome)


# ---- replay ---------------------------------------------------------------------------------------
async def replay(args: Any) -> int:
    if is_fifo(args.log):
        # Opened once, by the replay itself: a second open would wait for a second writer (a look at its
        # head here would take the first writer's bytes), with the loop and its stop signals held.
        pass
    else:
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
    if start:
        # Line numbers count from the top of the file, skipped launches included (what `report` says too).
        analyzer.next_no = count_lines(path, start) + 1
    with path.open("rb") as f:
        f.seek(start)
        fed, _ = analyze_file(f, analyzer, str(path), complete_only=True, clock=time.time)
    analyzer.mark_caught_up()
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
    kind = check_path(path)  # a device or a /proc file is refused before anything is read
    start, await_new = 0, False
    if kind is Kind.FILE:  # a FIFO has no past to catch up on: it is read as it comes
        begin = 0 if args.from_start else last_launch_offset(path, launch_marker(args.rules))
        start = _catch_up(path, analyzer, begin)
        # A launch that already failed is over: wait for the next one (a supervisor's restart). One that is
        # ready is the server as it stands: say so (a sidecar restarted after the server came up must not
        # call a healthy server stalled).
        await_new = not args.from_start and analyzer.tracker.verdict() == "failed"
        if not args.from_start and analyzer.tracker.verdict() == "ready":
            sink.note(time.time(), already_ready(spec.text, analyzer))
        if await_new:
            sink.note(
                time.time(),
                f"the last launch in {spec.text} already ended ({analyzer.tracker.verdict()}); "
                "waiting for a new launch",
            )
        else:
            for ev in analyzer.tracker.snapshot():  # what the current launch went through before we looked
                sink.event(ev, time.time())
    follower = FileFollower(path, start=start, note=note)
    return Followed(follower.chunks(), lambda: follower.offset, None, follower.close, await_new)


def already_ready(source: str, analyzer: Analyzer) -> str:
    """The note for a watch that arrives after the launch was ready: since when, by the log's own clock."""
    launch = analyzer.tracker.launch
    ready = launch.ready if launch is not None else None
    t = analyzer.ready_log_t
    when = f" since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t))} by the log's clock" if t else ""
    line = f" (line {ready.line_no})" if ready is not None and ready.line_no else ""
    return f"the last launch in {source} was already ready{when}{line}"


def _names(specs: list[Spec]) -> list[str]:
    labels = [s.label for s in specs]
    return [lab if labels.count(lab) == 1 else f"node{i + 1}" for i, lab in enumerate(labels)]


async def watch(args: Any) -> int:
    if getattr(args, "wait_at_most", None) is not None:
        from bootwatch.agent import wait

        return await wait.watch(args)
    specs = [parse_source(s) for s in args.sources]
    if args.verify and not args.url:
        raise UsageError("--verify needs --url")
    if args.url:
        check_url(args.url)
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
                opts = Options(
                    timeout_s=float("inf"), stall_s=None, verify=args.verify and i == 0, await_new_launch=f.await_new
                )
            session = Session(analyzer, node_sink, opts, probe=probe, source_bytes=f.bytes_read, source_death=f.death)
            nodes.append(Node(name, session, f.chunks))
        cluster = Cluster(nodes, sink, Options(timeout_s=args.timeout, stall_s=args.stall), each=args.each)
        outcome = await _with_interrupt(cluster.run())

        def record(_: dict[str, Any]) -> None:
            for node in nodes:
                history.record(node.session.summary(node.outcome or outcome), node.name, "watch")

        return await _close_after_then(args, sink, cluster.summary(outcome), outcome, record)
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
    opts = Options(
        timeout_s=args.timeout,
        stall_s=args.stall,
        verify=args.verify,
        await_new_launch=f.await_new,
        follow_after_ready=bool(getattr(args, "follow", False)),
    )
    session = Session(
        analyzer,
        sink,
        opts,
        probe=probe,
        source_bytes=f.bytes_read,
        source_death=f.death,
        insight=watch_insight(analyzer, getattr(args, "pid", None)),
    )
    try:
        outcome = await _with_interrupt(session.run(f.chunks))
        return await _close_after_then(
            args, sink, session.summary(outcome), outcome, lambda s: history.record(s, spec.text, "watch")
        )
    finally:
        await f.aclose()
        if probe is not None:
            await probe.close()


@dataclass
class ThenResult:
    """How the --then command went."""

    command: str
    exit_code: int  # 128 + N when a signal ended it, as a shell says
    duration_s: float
    interrupted: bool = False  # a stop signal came while it ran: it was stopped, and the server too
    server_exit: int | None = None  # the server's exit status, when it ended while the command ran

    def to_json(self) -> dict[str, Any]:
        return {"command": redact(self.command), "exit_code": self.exit_code, "duration_s": round(self.duration_s, 3)}

    def code(self) -> int:
        """bootwatch's exit code: the command's, or 1 if the server died meanwhile."""
        if self.interrupted:
            return interrupts().exit_code
        return 1 if self.server_exit is not None else self.exit_code


async def _run_then(
    cmd: str, server: ServerProcess | None, guard: Guard | None = None, to_stderr: bool = False
) -> ThenResult:
    """Run CMD through the shell once ready, in a process group of its own: a stop signal stops that whole
    group (the same bounded stop as the server's), and if bootwatch dies, so does CMD (PR_SET_PDEATHSIG on
    the shell, the guard for its group). With --json its output goes to stderr: stdout stays JSON lines."""
    stop = interrupts()
    # A process group of its own is a background group on the terminal: reading the terminal would stop
    # it (SIGTTIN) forever. It reads nothing there.
    stdin = subprocess.DEVNULL if sys.stdin is None or sys.stdin.isatty() else None
    start = time.monotonic()
    proc = await asyncio.create_subprocess_shell(
        cmd, stdin=stdin, stdout=2 if to_stderr else None, process_group=0, preexec_fn=die_with_parent()
    )
    if guard is not None:
        guard.watch(proc.pid)
    result = ThenResult(cmd, 0, 0.0)
    ended = asyncio.ensure_future(proc.wait())
    fired = asyncio.ensure_future(stop.fired.wait())
    try:
        while not ended.done():
            await asyncio.wait({ended, fired}, timeout=0.25, return_when=asyncio.FIRST_COMPLETED)
            if fired.done() and not ended.done():
                result.interrupted = True
                await stop_process_group(proc, stop)
                break
            if server is not None and result.server_exit is None and server.poll() is not None:
                result.server_exit = server.poll()
    finally:
        fired.cancel()
        if not ended.done():  # an exception: CMD must not outlive us
            await stop_process_group(proc, stop)
        await proc.wait()
        if guard is not None:
            guard.forget(proc.pid)
    rc = proc.returncode if proc.returncode is not None else 1
    result.exit_code = 128 - rc if rc < 0 else rc
    result.duration_s = time.monotonic() - start
    return result


def _then_note(then: ThenResult) -> str | None:
    """What text output says of a --then that did not go well (JSON has the `then` key)."""
    if then.interrupted:
        return f"--then command stopped ({signal.Signals(interrupts().exit_code - 128).name})"
    if then.server_exit is not None:
        code, sig = describe_exit(then.server_exit)
        how = f"killed by {signal.Signals(sig).name}" if sig and code is None else f"exit code {code}"
        return f"the server exited ({how}) while the --then command ran; --then command exited {then.exit_code}"
    if then.exit_code != 0:
        return f"--then command exited {then.exit_code}"
    return None


async def _close_after_then(
    args: Any,
    sink: Any,
    summary: dict[str, Any],
    outcome: str,
    record: Callable[[dict[str, Any]], None],
    server: ServerProcess | None = None,
    guard: Guard | None = None,
) -> int:
    """Ready with --then: CMD runs, then the summary (with `then`) is written and recorded, the last line."""
    if outcome != "ready" or not args.then:
        record(summary)
        _close(sink, summary, outcome)
        return _exit_code(outcome)
    handover = getattr(sink, "handover", None)  # a live view gives the terminal to CMD before it runs
    if handover is not None:
        handover(summary, time.time(), args.then)
    then = await _run_then(args.then, server, guard, to_stderr=args.json)
    summary["then"] = then.to_json()
    note = _then_note(then)
    if note and not args.json:
        sink.note(time.time(), note)
    record(summary)
    _close(sink, summary, "interrupted" if then.interrupted else outcome)
    return then.code()


# ---- run ------------------------------------------------------------------------------------------
_PORT_FLAGS = ("--port", "-p", "--server-port")
_HOST_FLAGS = ("--host", "--hostname")


def check_url(url: str, what: str = "--url") -> str:
    """The URL, if bootwatch can probe it; else a UsageError that says what is wrong."""
    example = "(for example http://127.0.0.1:8000/health)"
    try:
        parts = urlsplit(url)
    except ValueError as e:  # "Invalid IPv6 URL": an unclosed bracket
        raise UsageError(f"{what} {shown(url)}: not a URL ({e}) {example}") from None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise UsageError(f"{what} {shown(url)}: a URL has no control characters")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"{what} {shown(url)}: needs http:// or https:// and a host {example}")
    try:
        port = parts.port
    except ValueError:
        raise UsageError(
            f"{what} {shown(url)}: the port must be a number from 1 to 65535 "
            "(an IPv6 address goes in brackets: http://[::1]:8000/health)"
        ) from None
    if not parts.hostname:
        raise UsageError(f"{what} {shown(url)}: no host {example}")
    if port == 0:
        raise UsageError(f"{what} {shown(url)}: port 0 is not a port a server listens on")
    if any(c.isspace() for c in url):
        raise UsageError(f"{what} {shown(url)}: a URL has no spaces")
    return url


def guess_url(argv: list[str]) -> str | None:
    """The health URL from the server's own command line (--host/--port), if it names a port. A --port
    that is no port is an error now, before anything starts (`-p` is left alone: docker's -p 8000:8000)."""
    host, port = "127.0.0.1", None
    for i, a in enumerate(argv):
        for flags, setter in ((_PORT_FLAGS, "port"), (_HOST_FLAGS, "host")):
            for fl in flags:
                val = None
                if a == fl and i + 1 < len(argv):
                    val = argv[i + 1]
                elif a.startswith(fl + "="):
                    val = a.split("=", 1)[1]
                if val is None:
                    continue
                if setter == "port" and val.isdigit():
                    n = int(val)
                    if n > 65535 and fl != "-p":
                        raise UsageError(f"the server's {fl} {val} is not a port (1-65535); nothing was started")
                    if 0 < n < 65536:
                        port = n
                    elif n == 0:
                        port = None  # the server picks one; the log will say which
                elif setter == "host":
                    host = val
    if port is None:
        return None
    host = host.strip("[]")
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    netloc = f"[{host}]" if ":" in host else host
    return check_url(f"http://{netloc}:{port}/health", "the server's --host/--port make")


def default_log_path(argv: list[str], directory: Path = Path(".")) -> ServerLog:
    """A new log file of its own (time, pid and a random part, created exclusively)."""
    return ServerLog.create_default(argv, directory)


async def run(args: Any) -> int:
    argv = list(args.server_command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise UsageError("nothing to run: give the server's command after --")
    # Every argument is checked before anything starts: a bad one exits 2 with nothing left behind.
    if args.detach and args.then:
        raise UsageError("--detach and --then: choose one (--detach leaves, --then runs CMD and stops the server)")
    if getattr(args, "wait_at_most", None) is not None and not args.detach:
        raise UsageError("--wait-at-most needs --detach (the server must run on when the wait ends)")
    url = check_url(args.url) if args.url else guess_url(argv)
    book, _ = rules_for(args.rules)
    analyzer = Analyzer(engine=args.engine, rules=args.rules, clock="arrival")
    stop = interrupts()  # from here on a stop signal is ours to handle
    log = ServerLog.open(Path(args.log)) if args.log else default_log_path(argv)
    log_path = log.path
    try:
        if getattr(args, "wait_at_most", None) is not None:
            from bootwatch.agent import wait

            sink = wait.make_sink(args, analyzer, str(log_path))
        else:
            sink = make_sink(args, [(str(log_path), analyzer)], str(log_path))
        guard = Guard()
    except BaseException:
        log.discard()
        raise
    server = ServerProcess(argv, log, die_with_bootwatch=not (args.detach or args.keep))
    if stop.signum is not None:  # stopped before the server started: nothing to start, nothing to stop
        guard.release()
        log.discard()
        return stop.exit_code
    start_guarded(server, log, guard)
    release_guard = True
    try:
        return await _run_started(args, server, log, analyzer, sink, url, book.processes, guard, stop)
    except BaseException:
        release_guard = False  # the stop below may not have happened: the guard stops the group when we exit
        raise
    finally:
        if release_guard or not server.group_alive():
            guard.release()
        log.close()


async def _run_started(
    args: Any,
    server: ServerProcess,
    log: ServerLog,
    analyzer: Analyzer,
    sink: Any,
    url: str | None,
    critical: tuple[str, ...],
    guard: Guard,
    stop: Interrupts,
) -> int:
    log_path = log.path
    sink.note(time.time(), f"started pid {server.pid}: {shlex.join(server.argv)}  (log: {log_path})")
    if hasattr(sink, "set_server"):  # the probe's state file names the server's pid
        sink.set_server(server.pid)
    probe = HttpProbe(url) if url else None
    follower = FdFollower(log.read_fd, start=server.start_offset)
    follow = not args.detach and not args.then
    opts = Options(
        timeout_s=args.timeout,
        stall_s=args.stall,
        verify=args.verify,
        follow_after_ready=follow,
        critical=critical,
        probe_required=bool(args.url),
    )
    session = Session(
        analyzer,
        sink,
        opts,
        probe=probe,
        server=server,
        source_bytes=lambda: follower.offset,
        insight=Insight(analyzer.tracker, server.tree, server.argv),
    )
    record_as = (str(log_path), "run")
    stop_server = True
    try:
        if getattr(args, "wait_at_most", None) is not None:
            from bootwatch.agent import wait

            code, stop_server = await wait.run_started(
                args, session, follower.chunks(), server, log_path, lambda: follower.offset
            )
            return code
        outcome = await _with_interrupt(session.run(follower.chunks()))
        if outcome == "interrupted":
            server.begin_stop()  # the server hears the Ctrl-C now; the summary is written during its grace
        if outcome == "ready" and args.detach:
            stop_server = False
            code = _finish(session, sink, "ready", record_as)
            print(f"server pid {server.pid} runs on; log: {log_path}", file=sys.stderr if args.json else sys.stdout)
            return code
        if outcome == "ready" and args.then:
            summary = session.summary("ready")
            code = await _close_after_then(
                args, sink, summary, "ready", lambda s: history.record(s, *record_as), server, guard
            )
            # --keep keeps a running server; what is left of one that died (its children) goes.
            stop_server = not args.keep or stop.signum is not None or server.poll() is not None
            return code
        if args.keep and outcome in ("stalled", "timeout"):
            stop_server = False
        return _finish(session, sink, outcome, record_as)
    finally:
        follower.close()
        if session.probe is not None:
            await session.probe.close()
        if stop_server:
            await server.stop(stop)
