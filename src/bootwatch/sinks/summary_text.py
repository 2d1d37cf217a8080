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

_STYLE = {"ready": "bold green", "failed": "bold red", "incomplete": "bold yellow", "stalled": "bold yellow",
          "timeout": "bold red"}
_SAY = {
    "ready": "READY",
    "failed": "FAILED",
    "incomplete": "INCOMPLETE - the log ends while the server is still starting (or was stopped from outside)",
    "stalled": "STALLED",
    "timeout": "TIMED OUT",
}
_ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM", "tgi": "TGI", "llamacpp": "llama.cpp", "lmdeploy": "LMDeploy",
                 "trtllm": "TensorRT-LLM", "unknown": "unknown engine"}
_FACT_ORDER = ("model", "engine_version", "tp_size", "dp_size", "ep_size", "pp_size", "dtype", "context_length",
               "max_running_requests", "max_num_seqs", "max_total_num_tokens", "kv_cache_tokens", "kv_cache_gib",
               "max_concurrency", "weight_memory_gib", "mem_after_load_gib", "speculative_algorithm",
               "draft_model", "speculative_num_steps", "cuda_graph_batch_sizes", "port")


def _t(s: object, style: str = "", limit: int | None = None) -> Text:
    """A log's text as rich sees it: plain characters, nothing it could interpret. Cut after
    redaction, so that a cut cannot leave a secret's head unmasked."""
    text = shown(s)
    return Text(text if limit is None else text[:limit], style=style)


def render(summary: dict[str, Any], source: str, console: Console) -> None:
    if summary.get("servers"):  # --each: one block per server
        console.print(Text(f"{shown(summary['verdict']).upper()}   {len(summary['servers'])} servers",
                           style=_STYLE.get(summary["verdict"], "bold")))
        for s in summary["servers"]:
            console.print()
            render({k: v for k, v in s.items() if k != "servers"}, s.get("node", ""), console)
        return
    v = summary["verdict"]
    engine = summary.get("engine_display") or _ENGINE_NAMES.get(summary["engine"], summary["engine"])
    version = f" {summary['engine_version']}" if summary.get("engine_version") else ""
    head = Text()
    head.append(shown(_SAY.get(v, str(v).upper())), style=_STYLE.get(v, "bold"))
    head.append(shown(f"   {engine}{version}   {source}"))
    console.print(head)
    if summary.get("launches", 0) > 1 or summary.get("skipped_bytes"):
        console.print(_t(f"  (the log holds several launches; this is the last one, from line "
                         f"{summary.get('launch_start_line')})", "dim"))
    if v == "ready" and summary.get("ready"):
        r = summary["ready"]
        where = f" at line {r['line_no']}" if r.get("line_no") else ""
        console.print(_t(f"  ready{where}: {r['text']}"))
    verify = summary.get("verify")
    if verify:
        took = fmt_duration(verify.get("latency_s"))
        console.print(_t(f"  verify: one completion in {took}" if verify.get("ok")
                         else f"  verify failed after {took}: {verify.get('error') or ''}"))
    nodes = summary.get("nodes") or []
    for n in nodes:
        phase = f" (in {n['phase']})" if n.get("phase") and n["verdict"] != "ready" else ""
        console.print(_t(f"  node {n['node']}: {n['verdict']}{phase}"))
    f = summary.get("failure")
    if v == "failed" and f:
        procs = f" on {', '.join(f['procs'])}" if f.get("procs") else ""
        if f.get("node"):
            procs += f" of node {f['node']}"
        where = f"line {f['line_no']}, " if f.get("line_no") else ""
        console.print(_t(f"  root cause ({where}{f.get('category', 'unknown')}{procs}):", "bold"))
        console.print(_t("    " + f["text"], "red"))
        if f.get("detail"):
            console.print(_t("    " + f["detail"], "red"))
        ctx = [c for c in f.get("context") or [] if c.strip()]
        if ctx:
            console.print(Text("  context:", style="dim"))
            for c in ctx[-10:]:
                console.print(_t("    " + c, "dim", limit=304))
    rf = summary.get("runtime_failure")
    if rf:
        console.print(_t(f"  after readiness the server died (line {rf['line_no']}, {rf['category']}):",
                         "bold yellow"))
        console.print(_t("    " + rf["text"], "yellow"))

    phases = summary.get("phases") or []
    if phases:
        t = Table(title=None, box=None, pad_edge=False, show_header=True, header_style="bold")
        t.add_column("phase")
        t.add_column("lines", justify="right")
        t.add_column("duration", justify="right")
        t.add_column("progress", justify="right")
        last = len(phases) - 1
        for i, p in enumerate(phases):
            name = p["name"] + (" (draft)" if p.get("draft") else "")
            prog = "" if p.get("progress") is None else f"{p['progress'] * 100:.0f}%"
            if p.get("total"):
                prog = f"{p['n']}/{p['total']} {prog}"
            if i == last and v == "failed":
                prog = (prog + " ").lstrip() + "<- died here"
            elif i == last and v != "ready":
                prog = (prog + " ").lstrip() + "<- still here"
            lines = f"{p['start_line']}-{p['end_line']}" if p.get("end_line") else f"{p['start_line']}-"
            t.add_row(_t(name), _t(lines), _t(fmt_duration(p.get("duration_s"))), _t(prog))
        console.print()
        console.print(t)
    facts = summary.get("facts") or {}
    if facts:
        console.print()
        console.print(Text("facts", style="bold"))
        keys = [k for k in _FACT_ORDER if k in facts] + sorted(k for k in facts if k not in _FACT_ORDER)
        for k in keys:
            console.print(_t(f"  {k:<28} {facts[k]}", limit=151))
    warnings = summary.get("warnings") or []
    if warnings:
        console.print()
        console.print(Text("warnings", style="bold yellow"))
        for w in warnings:
            console.print(_t(f"  line {w['line_no']}: {w['kind']}: ", "yellow") + _t(w["text"], "yellow", limit=300))


__all__ = ["render"]
