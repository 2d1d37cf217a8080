"""Command line: parse arguments, wire a source, the tracker and sinks; nothing else lives here."""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys

from rich.console import Console

from bootwatch import __version__
from bootwatch.durations import parse_duration, positive_seconds
from bootwatch.errors import UsageError
from bootwatch.sources.registry import forms


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bootwatch", description="Watch an LLM inference server start up.")
    p.add_argument("--version", action="version", version=f"bootwatch {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser(
        "report",
        help="analyse a finished or partial log",
        description=(
            "Analyse a startup log: verdict, root cause, phases, facts, warnings. Exits 0 whenever the log "
            "could be read, whatever the verdict; 2 otherwise."
        ),
    )
    r.add_argument("log")
    r.add_argument("--engine", help="skip detection: an engine of the rule files (built in or --rules)")
    r.add_argument("--rules", action="append", default=[], metavar="FILE", help="extra rule file (TOML)")
    r.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    r.add_argument(
        "--exhaustive",
        action="store_true",
        help="read every byte (by default reading starts a few launches before the end)",
    )
    r.add_argument("--html", metavar="FILE", help="also write the startup's timeline as one self-contained HTML file")

    def live_common(c: argparse.ArgumentParser) -> None:
        c.add_argument("--engine", help="skip detection: an engine of the rule files (built in or --rules)")
        c.add_argument("--rules", action="append", default=[], metavar="FILE", help="extra rule file (TOML)")
        c.add_argument("--json", action="store_true", help="JSON events, one per line; the last is the summary")

    def timing(c: argparse.ArgumentParser) -> None:
        c.add_argument("--url", help="health URL to probe (refused and 503 are normal while loading)")
        c.add_argument("--verify", action="store_true", help="once ready, send a one-token completion")
        c.add_argument(
            "--timeout",
            type=parse_duration,
            default=3600.0,
            metavar="DUR",
            help="give up (exit 124) when not ready after DUR (default 60m)",
        )
        c.add_argument(
            "--stall",
            type=parse_duration,
            default=600.0,
            metavar="DUR",
            help="exit 4 after DUR of silence, longer in phases that are silent by nature (default 10m)",
        )
        c.add_argument(
            "--then",
            metavar="CMD",
            help="once ready, run CMD through the shell; exit with its code "
            "(with --json its output goes to stderr and the summary, last, records it)",
        )

    def bounded(c: argparse.ArgumentParser) -> None:
        from bootwatch.agent.options import add_wait_options

        add_wait_options(c)

    def export(c: argparse.ArgumentParser) -> None:
        c.add_argument(
            "--metrics-port",
            type=int,
            metavar="PORT",
            help="serve the startup's phase, progress, ETA "
            "and verdict as Prometheus metrics on PORT while it starts (and after, while bootwatch runs)",
        )
        c.add_argument(
            "--metrics-host", default="127.0.0.1", metavar="HOST", help="address for --metrics-port (default 127.0.0.1)"
        )
        c.add_argument(
            "--state",
            metavar="FILE",
            help="keep FILE (JSON, replaced atomically) up to date for `bootwatch probe --state FILE`",
        )

    w = sub.add_parser(
        "watch",
        help="follow a server that is starting elsewhere",
        description=(
            f"Follow a server's log until it is ready, failed, stalled or timed out. SOURCE is {forms()}. "
            "Several SOURCEs are one server spread over several nodes, "
            "unless --each. By default only the current launch of a file is judged; if the file's last launch "
            "already ended, bootwatch waits for a new one."
        ),
    )
    w.add_argument("sources", nargs="+", metavar="SOURCE")
    w.add_argument("--from-start", action="store_true", help="read the whole file, not just the last launch")
    w.add_argument(
        "--pid",
        type=int,
        metavar="PID",
        help="the server's process: its tree's reads, CPU and "
        "compilers tell a slow startup from a stuck one while the log is silent",
    )
    w.add_argument(
        "--each",
        action="store_true",
        help="the SOURCEs are independent servers (replicas): exit 0 only when all are ready",
    )
    w.add_argument(
        "--follow",
        action="store_true",
        help="keep following after ready (throughput, queue, KV use, "
        "findings; /metrics too with --url) until Ctrl-C or the server dies",
    )
    live_common(w)
    timing(w)
    export(w)
    bounded(w)

    rn = sub.add_parser(
        "run",
        help="launch the server, keep its output in a log file, and watch it",
        description="Launch COMMAND in its own process group with its output in a log file, and watch it start.",
    )
    rn.add_argument(
        "--log",
        metavar="PATH",
        help="log file, a regular file in a directory that exists (appended; "
        "default: a new bootwatch-<cmd>-<time>-<pid>-<random>.log here)",
    )
    rn.add_argument("--keep", action="store_true", help="leave the server running after --then, stall or timeout")
    rn.add_argument("--detach", action="store_true", help="exit 0 once ready and leave the server running")
    live_common(rn)
    timing(rn)
    export(rn)
    bounded(rn)
    rn.add_argument("server_command", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS...")

    rp = sub.add_parser("replay", help="play a recorded log as if the server were starting now")
    rp.add_argument("log")
    rp.add_argument("--speed", type=float, default=1.0, help="1 = real pace, 10 = ten times faster, 0 = at once")
    live_common(rp)

    pr = sub.add_parser(
        "probe",
        help="a Kubernetes exec probe: fails only when the server is dead or stalled",
        description="Exit 0 when the server is ready or starting; 1 when it failed or died, 4 when "
        "it stalled (never for elapsed time); with --ready, 3 while it is still starting. Reads "
        "the state a `watch --state FILE` or `run --state FILE` keeps, or else the LOG itself.",
    )
    pr.add_argument("log", nargs="?", metavar="LOG", help="the server's log (when no state file, or it is stale)")
    pr.add_argument("--state", metavar="FILE", help="the state file of a watch or run")
    pr.add_argument(
        "--stall",
        type=parse_duration,
        metavar="DUR",
        help="also fail (exit 4) when the log is silent this long, longer in phases silent by nature",
    )
    pr.add_argument("--ready", action="store_true", help="exit 3 while still starting: 0 only once ready")
    pr.add_argument("--json", action="store_true", help="one JSON object: status, phase, detail, exit_code")

    h = sub.add_parser(
        "history",
        help="past startups seen on this machine (by watch and run)",
        description=(
            "Past startups seen by watch and run on this machine, oldest first, from the store in BOOTWATCH_HOME "
            "(default XDG_DATA_HOME/bootwatch)/history.sqlite3."
        ),
    )
    h.add_argument("--json", action="store_true", help="one JSON object per startup, with its phases")
    h.add_argument("--limit", type=int, default=50, help="the last N startups (default 50)")
    h.add_argument(
        "--suggest-probes",
        action="store_true",
        help="print startupProbe settings (YAML) per engine "
        "and model from the ready startups' p95 time to ready (--limit 1000 by default)",
    )
    h.add_argument(
        "--html",
        metavar="FILE",
        help="write their timelines (phases per startup, side by side) as one self-contained HTML file",
    )
    h.add_argument(
        "--compare",
        nargs=2,
        type=int,
        metavar=("A", "B"),
        help="two startups side by side, phase by phase (ids from --json or --html)",
    )
    sub.add_parser(
        "mcp",
        help="a Model Context Protocol server on stdio for coding agents (needs bootwatch[mcp])",
        description="Serve bootwatch's tools (start a server detached, wait for its startup within a bounded "
        "time, read a log, stop it, list recent startups) to an MCP client over stdin/stdout.",
    )
    return p


def cmd_report(args: argparse.Namespace) -> int:
    from bootwatch.pipeline import analyze_path
    from bootwatch.sinks.summary_text import render
    from bootwatch.sources.interrupts import catch_early, stop_requested

    catch_early()  # a stop signal ends the reading; the summary of what was read is still printed
    summary = analyze_path(args.log, engine=args.engine, rules=args.rules, exhaustive=args.exhaustive)
    stopped = stop_requested()
    if args.html:
        from bootwatch.sinks.html import report_timeline

        report_timeline(args.html, summary, args.log)
    if args.json:
        from bootwatch.sinks.events import summary_json

        sys.stdout.write(summary_json(summary) + "\n")
    else:
        console = Console(highlight=False, soft_wrap=True)
        render(summary, args.log, console)
        if summary.get("lines", 0) == 0:
            console.print("  (the log is empty)", style="dim")
        if summary.get("truncated_lines"):
            console.print(
                f"  ({summary['truncated_lines']} over-long line(s) were cut to their first and last 64 KiB)",
                style="dim",
            )
    if stopped is not None:
        print(
            f"bootwatch: stopped by {signal.Signals(stopped).name} after line {summary.get('lines', 0)};"
            " the summary covers the log up to there",
            file=sys.stderr,
        )
        return 128 + stopped
    return 0


def entry() -> None:
    """The console script: once the output is flushed, leave at once. Interpreter teardown (a garbage
    collection over every imported module) costs 40-75 ms, which a script waiting for readiness would wait."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    os._exit(code)


def cmd_history(args: argparse.Namespace, argv: list[str] | None) -> int:
    from bootwatch.sinks import history

    if args.limit < 1:
        raise UsageError(f"--limit {args.limit}: must be at least 1")
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    if getattr(args, "suggest_probes", False):
        from bootwatch.probe_suggest import render_yaml, suggest

        given = any(a.startswith("--limit") for a in (sys.argv[1:] if argv is None else argv))
        sys.stdout.write(render_yaml(suggest(history.load(args.limit if given else 1000))))
        return 0
    if args.compare:
        history.compare(args.compare[0], args.compare[1], console)
        return 0
    entries = history.load(args.limit)
    if args.html:
        from bootwatch.sinks.html import write_timeline

        write_timeline(args.html, entries, "bootwatch: startup history")
        if not args.json:  # the page is what was asked for: the table is in it, not also on stdout
            print(f"wrote {args.html} ({len(entries)} startup(s))")
            return 0
    if args.json:
        for e in entries:
            sys.stdout.write(json.dumps(e.to_json()) + "\n")
    else:
        history.render(entries, console)
    return 0


_MAX_ID = (1 << 63) - 1  # what SQLite's integers hold


def _check_args(args: argparse.Namespace) -> None:
    """Values argparse takes but that mean nothing: refused, with what is wrong, before anything starts."""
    for name in ("timeout", "stall"):
        v = getattr(args, name, None)
        if v is not None:
            positive_seconds(v, f"--{name}")
    port = getattr(args, "metrics_port", None)
    if port is not None and not 0 <= port <= 65535:
        raise UsageError(f"--metrics-port {port}: a port is a number from 0 to 65535")
    pid = getattr(args, "pid", None)
    if pid is not None and pid <= 0:
        raise UsageError(f"--pid {pid}: a process id is a positive number")
    speed = getattr(args, "speed", None)
    if speed is not None and not (math.isfinite(speed) and speed >= 0):
        raise UsageError(f"--speed {speed}: give 0 (at once) or a positive pace such as 1 or 10")
    for name in ("log", "html", "state"):
        if getattr(args, name, None) == "":
            raise UsageError(f"{'--' + name if name != 'log' or args.command == 'run' else 'LOG'}: an empty file name")
    state = getattr(args, "state", None)
    if state and args.command != "probe" and os.path.isdir(state):
        raise UsageError(f"--state {state}: is a directory; give the state file's path")
    limit = getattr(args, "limit", None)
    if limit is not None and limit > _MAX_ID:
        raise UsageError(f"--limit {limit}: too large")
    for n in getattr(args, "compare", None) or ():
        if not 0 < n <= _MAX_ID:
            raise UsageError(f"--compare {n}: no such startup (the ids are in `bootwatch history`)")


def _dispatch(args: argparse.Namespace, argv: list[str] | None) -> int:
    _check_args(args)
    if args.command == "report":
        return cmd_report(args)
    if args.command == "probe":
        from bootwatch.probe import main as probe_main

        return probe_main(args)
    if args.command == "history":
        return cmd_history(args, argv)
    if args.command == "mcp":
        from bootwatch.agent.mcp_server import main as mcp_main

        return mcp_main()
    if args.command in ("watch", "run", "replay"):
        import asyncio

        from bootwatch import commands
        from bootwatch.sources.interrupts import catch_early, retiring

        catch_early()
        return int(asyncio.run(retiring(getattr(commands, args.command)(args))))
    return 2


def _said(e: BaseException) -> str:
    """An error message as printed: it may quote a URL or an argument, so secrets are masked there too."""
    from bootwatch.text import shown

    return shown(e)


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except UsageError as e:  # a bad DUR
        print(f"bootwatch: {_said(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C while the arguments are parsed: nothing started yet
        return 130
    try:
        return _dispatch(args, argv)
    except UsageError as e:
        print(f"bootwatch: {_said(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _output_gone()
    except SystemExit as e:
        # Nothing of ours calls sys.exit once the arguments are parsed: this is rich's answer to a broken
        # pipe (it points stdout at /dev/null and raises SystemExit(1)).
        if e.code == 1:
            return _output_gone()
        raise
    except Exception as e:  # a bug: one line and exit 2 (1 would say "the server failed")
        if os.environ.get("BOOTWATCH_DEBUG"):
            raise
        from bootwatch.text import shown

        print(
            f"bootwatch: internal error: {e.__class__.__name__}: {shown(e)} (BOOTWATCH_DEBUG=1 shows where)",
            file=sys.stderr,
        )
        return 2


EXIT_OUTPUT_GONE = 141  # 128 + SIGPIPE: what any Unix tool whose reader left (`| head -1`) exits with


def _output_gone() -> int:
    """The reader of our output went away: no traceback, no more writes to stdout."""
    import contextlib

    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_OUTPUT_GONE
