"""Warnings that no single line states but the facts together do (capacity that costs throughput)."""

from __future__ import annotations

from typing import Any

from bootwatch.engines import capacity_judge as capacity

# Below this many full-context requests fitting in the KV cache at once, long prompts queue up.
MIN_FULL_LENGTH_REQUESTS = 4


def check(launch: Any) -> list[dict[str, Any]]:
    f = launch.facts
    lines = launch.fact_lines
    out: list[dict[str, Any]] = []

    def add(kind: str, fact: str, text: str) -> None:
        if kind not in launch.warned:
            out.append({"kind": kind, "line_no": lines.get(fact, launch.last_no), "text": text})

    # Asked versus effective, by the engine's own arithmetic (its file's [[capacity]] tables).
    out += capacity.startup_warnings(launch)
    kv = f.get("max_total_num_tokens") or f.get("kv_cache_tokens")
    ctx = f.get("context_length")
    if isinstance(kv, int) and isinstance(ctx, int) and ctx > 0:
        if kv < ctx:
            add(
                "kv_cache_below_context",
                "context_length"
                if lines.get("context_length", 0) > lines.get("max_total_num_tokens", lines.get("kv_cache_tokens", 0))
                else ("max_total_num_tokens" if "max_total_num_tokens" in f else "kv_cache_tokens"),
                f"the KV cache holds {kv} tokens, fewer than one full-context request ({ctx} tokens)",
            )
        elif kv / ctx < MIN_FULL_LENGTH_REQUESTS:
            add(
                "low_full_length_concurrency",
                "max_total_num_tokens" if "max_total_num_tokens" in f else "kv_cache_tokens",
                f"the KV cache ({kv} tokens) holds only {kv / ctx:.1f} full-context ({ctx}-token) requests at once",
            )
    if f.get("disable_cuda_graph") is True or f.get("enforce_eager") is True:
        fact = "disable_cuda_graph" if f.get("disable_cuda_graph") is True else "enforce_eager"
        add("cuda_graph_disabled", fact, "CUDA graphs are disabled: decoding runs eagerly and is much slower")
    return out
