"""Command line: parse arguments, wire a source, the tracker and sinks; nothing else lives here."""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console

from bootwatch import __version__
from bootwatch.errors import UsageError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bootwatch", description="Watch an LLM inference server start up.")
    p.add_argument("--version", action="version", version=f"bootwatch {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser("report", help="analyse a finished or partial log", description=(
        "Analyse a startup log: verdict, root cause, phases, facts, warnings. Exits 0 whenever the log "
        "could be read, whatever the verdict; 2 otherwise."))
    r.add_argument("log")
    r.add_argument("--engine", choices=["sglang", "vllm", "tgi", "llamacpp", "lmdeploy", "trtllm", "unknown"])
    r.add_argument("--rules", action="append", default=[], metavar="FILE", help="extra rule file (TOML)")
    r.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    return p


def cmd_report(args: argparse.Namespace) -> int:
    from bootwatch.analyze import analyze_path
    from bootwatch.sinks.summary_text import render

    summary = analyze_path(args.log, engine=args.engine, rules=args.rules)
    if args.json:
        sys.stdout.write(json.dumps(summary) + "\n")
    else:
        console = Console(highlight=False, soft_wrap=True)
        render(summary, args.log, console)
        if summary.get("lines", 0) == 0:
            console.print("  (the log is empty)", style="dim")
        if summary.get("truncated_lines"):
            console.print(f"  ({summary['truncated_lines']} over-long line(s) were cut to their first and "
                          "last 64 KiB)", style="dim")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "report":
            return cmd_report(args)
    except UsageError as e:
        print(f"bootwatch: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return 2
