"""The live commands (watch, run, replay) as CLI adapters: argparse options -> a typed config (runner.py) and
an Output (sinks/registry.py) -> the runner -> an exit code. Nothing here watches or decides."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from bootwatch.errors import UsageError
from bootwatch.pipeline import Analyzer
from bootwatch.runner import (
    INTERRUPTED,
    Body,
    ReplayConfig,
    Result,
    RunConfig,
    ServerRun,
    SinkFor,
    WatchConfig,
    run_with,
)
from bootwatch.runner import replay as replay_log
from bootwatch.runner import run as run_server
from bootwatch.runner import watch as watch_sources
from bootwatch.sinks.protocol import Sink
from bootwatch.sinks.registry import Output, make_sink
from bootwatch.sources.interrupts import interrupts
from bootwatch.tracker.verdict import EXIT


def output_of(args: argparse.Namespace) -> Output:
    state = getattr(args, "state", None)
    return Output(
        json=bool(args.json),
        metrics_port=getattr(args, "metrics_port", None),
        metrics_host=getattr(args, "metrics_host", None) or "127.0.0.1",
        state=Path(state) if state else None,
    )


def _sink_for(out: Output) -> SinkFor:
    def sink_for(analyzers: Sequence[tuple[str, Analyzer]], source: str) -> Sink:
        tracker = analyzers[0][1].tracker if len(analyzers) == 1 else None  # metrics read the engine from it
        return make_sink(out, [name for name, _ in analyzers], source, tracker)

    return sink_for


def outcome_exit_code(outcome: str) -> int:
    return interrupts().exit_code if outcome == INTERRUPTED else EXIT.get(outcome, 1)


def exit_code(result: Result) -> int:
    return result.then.code() if result.then is not None else outcome_exit_code(result.outcome)


async def replay(args: argparse.Namespace) -> int:
    cfg = ReplayConfig(args.log, speed=args.speed, engine=args.engine, rules=tuple(args.rules))
    return exit_code(await replay_log(cfg, _sink_for(output_of(args)), interrupts()))


async def watch(args: argparse.Namespace) -> int:
    if getattr(args, "wait_at_most", None) is not None:
        from bootwatch.agent import wait

        return await wait.watch(args)
    cfg = WatchConfig(
        WatchConfig.specs(args.sources),
        url=args.url,
        verify=args.verify,
        timeout_s=args.timeout,
        stall_s=args.stall,
        engine=args.engine,
        rules=tuple(args.rules),
        from_start=args.from_start,
        each=args.each,
        follow=bool(args.follow),
        attach_ready=bool(args.follow) or bool(getattr(args, "state", None)),
        pid=args.pid,
        then=args.then,
        then_to_stderr=args.json,
    )
    return exit_code(await watch_sources(cfg, _sink_for(output_of(args)), interrupts()))


async def run(args: argparse.Namespace) -> int:
    argv = list(args.server_command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise UsageError("nothing to run: give the server's command after --")
    # Every argument is checked before anything starts: a bad one exits 2 with nothing left behind.
    waiting = getattr(args, "wait_at_most", None) is not None
    if waiting and not args.detach:
        raise UsageError("--wait-at-most needs --detach (the server must run on when the wait ends)")
    cfg = RunConfig(
        tuple(argv),
        url=args.url,
        log=Path(args.log) if args.log else None,
        timeout_s=args.timeout,
        stall_s=args.stall,
        verify=args.verify,
        engine=args.engine,
        rules=tuple(args.rules),
        detach=args.detach,
        keep=args.keep,
        then=args.then,
        then_to_stderr=args.json,
        die_with_bootwatch=not (args.detach or args.keep),
    )
    out = output_of(args)
    stop = interrupts()  # from here on a stop signal is ours to handle
    if waiting:
        code = await run_with(cfg, _waiting_sink(args), _waiting(args), stop)
        return stop.exit_code if code is None else code
    result = await run_server(cfg, _sink_for(out), stop)
    if result is None:  # stopped before the server started: nothing to start, nothing to stop
        return stop.exit_code
    if result.detached:
        print(f"server pid {result.pid} runs on; log: {result.log_path}", file=sys.stderr if args.json else sys.stdout)
    return exit_code(result)


# ---- run --detach --wait-at-most (agent/wait.py) ------------------------------------------------------
def _waiting_sink(args: argparse.Namespace) -> SinkFor:
    def sink_for(analyzers: Sequence[tuple[str, Analyzer]], source: str) -> Sink:
        from bootwatch.agent import wait

        return wait.make_sink(args, analyzers[0][1], source)

    return sink_for


def _waiting(args: argparse.Namespace) -> Body[int]:
    async def body(r: ServerRun) -> tuple[int, bool]:
        from bootwatch.agent import wait

        session, chunks = r.prepare()
        return await wait.run_started(args, session, chunks, r.server, r.log.path, r.log_offset)

    return body
