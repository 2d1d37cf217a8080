"""The summary a person reads in five seconds: verdict, root cause, phase timeline, facts, warnings."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

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


def fmt_duration(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def render(summary: dict[str, Any], source: str, console: Console) -> None:
    if summary.get("servers"):  # --each: one block per server
        console.print(Text(f"{summary['verdict'].upper()}   {len(summary['servers'])} servers", style=_STYLE.get(
            summary["verdict"], "bold")))
        for s in summary["servers"]:
            console.print()
            render({k: v for k, v in s.items() if k != "servers"}, s.get("node", ""), console)
        return
    v = summary["verdict"]
    engine = _ENGINE_NAMES.get(summary["engine"], summary["engine"])
    version = f" {summary['engine_version']}" if summary.get("engine_version") else ""
    head = Text()
    head.append(_SAY.get(v, v.upper()), style=_STYLE.get(v, "bold"))
    head.append(f"   {engine}{version}   {source}")
    console.print(head)
    if summary.get("launches", 0) > 1 or summary.get("skipped_bytes"):
        console.print(f"  (the log holds several launches; this is the last one, from line "
                      f"{summary.get('launch_start_line')})", style="dim")
    if v == "ready" and summary.get("ready"):
        r = summary["ready"]
        console.print(f"  ready at line {r['line_no']}: {r['text']}")
    nodes = summary.get("nodes") or []
    for n in nodes:
        phase = f" (in {n['phase']})" if n.get("phase") and n["verdict"] != "ready" else ""
        console.print(f"  node {n['node']}: {n['verdict']}{phase}")
    f = summary.get("failure")
    if v == "failed" and f:
        procs = f" on {', '.join(f['procs'])}" if f.get("procs") else ""
        if f.get("node"):
            procs += f" of node {f['node']}"
        console.print(Text(f"  root cause (line {f['line_no']}, {f['category']}{procs}):", style="bold"))
        console.print(Text("    " + f["text"], style="red"))
        if f.get("detail"):
            console.print(Text("    " + f["detail"], style="red"))
        ctx = [c for c in f.get("context", []) if c.strip()]
        if ctx:
            console.print("  context:", style="dim")
            for c in ctx[-10:]:
                console.print(Text("    " + c[:300]), style="dim")
    rf = summary.get("runtime_failure")
    if rf:
        console.print(Text(f"  after readiness the server died (line {rf['line_no']}, {rf['category']}):",
                           style="bold yellow"))
        console.print(Text("    " + rf["text"], style="yellow"))

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
            t.add_row(name, lines, fmt_duration(p.get("duration_s")), prog)
        console.print()
        console.print(t)
    facts = summary.get("facts") or {}
    if facts:
        console.print()
        console.print("facts", style="bold")
        keys = [k for k in _FACT_ORDER if k in facts] + sorted(k for k in facts if k not in _FACT_ORDER)
        for k in keys:
            val = facts[k]
            s = str(val)
            console.print(f"  {k:<28} {s[:120]}")
    warnings = summary.get("warnings") or []
    if warnings:
        console.print()
        console.print("warnings", style="bold yellow")
        for w in warnings:
            console.print(Text(f"  line {w['line_no']}: {w['kind']}: {w['text'][:300]}", style="yellow"))
