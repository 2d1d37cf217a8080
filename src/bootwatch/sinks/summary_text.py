"""The summary a person reads in five seconds: verdict, root cause, phase timeline, facts, warnings.

Everything that came from a log (lines, facts, paths) reaches rich as `Text` made with `shown`:
never as markup (a `[/]` in a model path must not crash the report), never with its control
characters, never with its secrets.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from bootwatch.durations import fmt_duration
from bootwatch.text import shown

_STYLE = {
    "ready": "bold green",
    "failed": "bold red",
    "incomplete": "bold yellow",
    "stalled": "bold yellow",
    "timeout": "bold red",
}
_SAY = {
    "ready": "READY",
    "failed": "FAILED",
    "incomplete": "INCOMPLETE - the log ends while the server is still starting (or was stopped from outside)",
    "stalled": "STALLED",
    "timeout": "TIMED OUT",
}
_ENGINE_NAMES = {
    "sglang": "SGLang",
    "vllm": "vLLM",
    "tgi": "TGI",
    "llamacpp": "llama.cpp",
    "lmdeploy": "LMDeploy",
    "trtllm": "TensorRT-LLM",
    "unknown": "unknown engine",
}
_FACT_ORDER = (
    "model",
    "engine_version",
    "tp_size",
    "dp_size",
    "ep_size",
    "pp_size",
    "dtype",
    "context_length",
    "max_running_requests",
    "max_num_seqs",
    "max_total_num_tokens",
    "kv_cache_tokens",
    "kv_cache_gib",
    "max_concurrency",
    "weight_memory_gib",
    "mem_after_load_gib",
    "speculative_algorithm",
    "draft_model",
    "speculative_num_steps",
    "cuda_graph_batch_sizes",
    "port",
)


def _t(s: object, style: str = "", limit: int | None = None) -> Text:
    """A log's text as rich sees it: plain characters, nothing it could interpret. Cut after
    redaction, so that a cut cannot leave a secret's head unmasked."""
    text = shown(s)
    return Text(text if limit is None else text[:limit], style=style)


def render(summary: dict[str, Any], source: str, console: Console) -> None:
    """The report, block after block; a block with nothing to say prints nothing."""
    if summary.get("servers"):  # --each: one block per server
        _each_server(summary, console)
        return
    _headline(summary, source, console)
    _launches(summary, console)
    _ready(summary, console)
    _verify(summary, console)
    _nodes(summary, console)
    _failure(summary, console)
    _runtime_failure(summary, console)
    _phase_table(summary, console)
    _facts(summary, console)
    _serving(summary, console)
    _warnings(summary, console)


def _each_server(summary: dict[str, Any], console: Console) -> None:
    console.print(
        Text(
            f"{shown(summary['verdict']).upper()}   {len(summary['servers'])} servers",
            style=_STYLE.get(summary["verdict"], "bold"),
        )
    )
    for s in summary["servers"]:
        console.print()
        render({k: v for k, v in s.items() if k != "servers"}, s.get("node", ""), console)


def _headline(summary: dict[str, Any], source: str, console: Console) -> None:
    v = summary["verdict"]
    engine = summary.get("engine_display") or _ENGINE_NAMES.get(summary["engine"], summary["engine"])
    version = f" {summary['engine_version']}" if summary.get("engine_version") else ""
    head = Text()
    head.append(shown(_SAY.get(v, str(v).upper())), style=_STYLE.get(v, "bold"))
    head.append(shown(f"   {engine}{version}   {source}"))
    console.print(head)


def _launches(summary: dict[str, Any], console: Console) -> None:
    if summary.get("newest_first"):
        console.print(_t("  (the log lists its newest line first: read from its last line up)", "dim"))
    if summary.get("launches", 0) > 1 or summary.get("skipped_bytes"):
        console.print(
            _t(
                f"  (the log holds several launches; this is the last one, from line "
                f"{summary.get('launch_start_line')})",
                "dim",
            )
        )


def _ready(summary: dict[str, Any], console: Console) -> None:
    up = summary.get("server_ready")
    if up:  # a model load of a server that was up already (Ollama): the API's readiness, then the load's
        console.print(_t(f"  API ready at line {up['line_no']}: {up['text']}"))
    r = summary.get("ready")
    if summary["verdict"] == "ready" and r:
        where = f" at line {r['line_no']}" if r.get("line_no") else ""
        what = "model loaded" if up else "ready"
        console.print(_t(f"  {what}{where}: {r['text']}"))
        if r.get("how"):
            console.print(_t(f"  ({r['how']})", "dim"))


def _verify(summary: dict[str, Any], console: Console) -> None:
    verify = summary.get("verify")
    if verify:
        took = fmt_duration(verify.get("latency_s"))
        console.print(
            _t(
                f"  verify: one completion in {took}"
                if verify.get("ok")
                else f"  verify failed after {took}: {verify.get('error') or ''}"
            )
        )


def _nodes(summary: dict[str, Any], console: Console) -> None:
    for n in summary.get("nodes") or []:
        phase = f" (in {n['phase']})" if n.get("phase") and n["verdict"] != "ready" else ""
        console.print(_t(f"  node {n['node']}: {n['verdict']}{phase}"))


def _failure(summary: dict[str, Any], console: Console) -> None:
    f = summary.get("failure")
    if summary["verdict"] != "failed" or not f:
        return
    procs = f" on {', '.join(f['procs'])}" if f.get("procs") else ""
    if f.get("node"):
        procs += f" of node {f['node']}"
    where = f"line {f['line_no']}, " if f.get("line_no") else ""
    console.print(_t(f"  root cause ({where}{f.get('category', 'unknown')}{procs}):", "bold"))
    console.print(_t("    " + f["text"], "red"))
    if f.get("detail"):
        console.print(_t("    " + f["detail"], "red"))
    _failure_context(f, console)


def _failure_context(failure: dict[str, Any], console: Console) -> None:
    """The lines before the root cause: the last ten that say anything, without the engine's prefix (time,
    level, source file: at 80 columns it would take the line), tagged with their process only where the
    lines come from more than one."""
    from bootwatch.lines.prefixes import parse_prefix

    ctx = [parse_prefix(c, 2000) for c in failure.get("context") or [] if c.strip()][-10:]
    if ctx:
        console.print(Text("  context:", style="dim"))
        several = len({c.proc for c in ctx}) > 1
        for c in ctx:
            tag = f"[{c.proc}] " if several and c.proc else ""
            console.print(_t("    " + tag + c.text, "dim", limit=304))


def _runtime_failure(summary: dict[str, Any], console: Console) -> None:
    rf = summary.get("runtime_failure")
    if rf:
        console.print(_t(f"  after readiness the server died (line {rf['line_no']}, {rf['category']}):", "bold yellow"))
        console.print(_t("    " + rf["text"], "yellow"))


def _phase_table(summary: dict[str, Any], console: Console) -> None:
    phases = summary.get("phases") or []
    if not phases:
        return
    t = Table(title=None, box=None, pad_edge=False, show_header=True, header_style="bold")
    t.add_column("phase")
    t.add_column("lines", justify="right")
    t.add_column("duration", justify="right")
    t.add_column("progress", justify="right")
    last = len(phases) - 1
    for i, p in enumerate(phases):
        name = p["name"] + (" (draft)" if p.get("draft") else "")
        lines = f"{p['start_line']}-{p['end_line']}" if p.get("end_line") else f"{p['start_line']}-"
        prog = _progress_cell(p, _stop_mark(summary["verdict"]) if i == last else "")
        t.add_row(_t(name), _t(lines), _t(fmt_duration(p.get("duration_s"))), _t(prog))
    console.print()
    console.print(t)


def _stop_mark(verdict: object) -> str:
    """What the last phase of a startup that never became ready says: where it stopped."""
    if verdict == "failed":
        return "<- died here"
    return "" if verdict == "ready" else "<- still here"


def _progress_cell(phase: dict[str, Any], mark: str) -> str:
    prog = "" if phase.get("progress") is None else f"{phase['progress'] * 100:.0f}%"
    if phase.get("total"):
        prog = f"{phase['n']}/{phase['total']} {prog}"
    if mark:
        prog = (prog + " ").lstrip() + mark
    return prog


def _facts(summary: dict[str, Any], console: Console) -> None:
    facts = summary.get("facts") or {}
    if not facts:
        return
    console.print()
    console.print(Text("facts", style="bold"))
    keys = [k for k in _FACT_ORDER if k in facts] + sorted(k for k in facts if k not in _FACT_ORDER)
    for k in keys:
        console.print(_t(f"  {k:<28} {facts[k]}", limit=151))


def _serving(summary: dict[str, Any], console: Console) -> None:
    """After ready: the load it carried and the requests it refused or failed, by cause."""
    sv = summary.get("serving")
    req = (sv or {}).get("requests")
    failed = bool(req and req["failed"])
    if not sv or (sv.get("throughput_p50") is None and not failed):
        return  # a request or two after ready and none refused: the JSON has the numbers, the reader needs none
    console.print()
    console.print(Text("serving", style="bold"))
    if sv.get("throughput_p50") is not None:
        console.print(
            _t(f"  throughput                   p50 {sv['throughput_p50']} tok/s, p90 {sv['throughput_p90']}")
        )
    console.print(_t(f"  peak running / queued        {sv.get('peak_running', 0)} / {sv.get('peak_queue', 0)}"))
    if req and failed:
        console.print(_t(f"  requests                     {req['seen']} seen, {req['failed']} refused or failed"))
        for cause, n in req["by_cause"].items():
            console.print(_t(f"    {cause:<26} {n}", "yellow"))


def _warnings(summary: dict[str, Any], console: Console) -> None:
    warnings = summary.get("warnings") or []
    if not warnings:
        return
    console.print()
    console.print(Text("warnings", style="bold yellow"))
    for w in warnings:
        console.print(_t(f"  line {w['line_no']}: {w['kind']}: ", "yellow") + _t(w["text"], "yellow", limit=300))


__all__ = ["render"]
