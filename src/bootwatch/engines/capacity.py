"""The `[[capacity]]` tables of an engine file: which facts hold what a server was asked to run and what it
runs, and the engine's own arithmetic between the two. Judged by bootwatch.engines.capacity_judge; a finding comes only
when the effective value is below what that arithmetic gives (SGLang's per-DP-rank division is not a cut).

Two shapes:
- `cut`: `asked` (the flag's value) against `effective` (what the engine says it runs), `asked` divided by the
  fact `per_rank` first when the fact `per_rank_when` is true (SGLang with DP attention);
- `split`: one budget (`total`) shared by `parts` (llama.cpp's -c over -np slots): each part gets `share`;
  said when there are several parts and each gets less than `limit` (the model's training context) or `limit`
  is unknown, unless the fact `unless` is true (a unified KV cache: every slot may use all of it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bootwatch.errors import UsageError

SHAPES = ("cut", "split")
_STR_KEYS = (
    "name",
    "shape",
    "knob",
    "asked",
    "effective",
    "per_rank",
    "per_rank_when",
    "total",
    "parts",
    "share",
    "limit",
    "unless",
    "message",
    "why",
    "fix",
    "note",
)


@dataclass(frozen=True, slots=True)
class Reason:
    """When the fact `fact` is known, this is why the value is lower (and what fixes it then)."""

    fact: str
    why: str
    fix: str | None = None
    unasked: bool = False  # only when nothing was asked (an engine default, not a cut of a value given)
    at_most: int | None = None  # only when the effective value is this low (a default's size)


@dataclass(frozen=True, slots=True)
class CapacitySpec:
    name: str  # the warning's kind
    shape: str
    message: str  # the finding, with {asked} {effective} {expected} {divisor} {share} {parts} {total} and facts
    fix: str
    source: str  # "sglang.toml#capacity[0]"
    knob: str = ""
    asked: str | None = None
    effective: str | None = None
    per_rank: str | None = None
    per_rank_when: str | None = None
    total: str | None = None
    parts: str | None = None
    share: str | None = None
    limit: str | None = None
    unless: str | None = None
    why: str = ""
    reasons: tuple[Reason, ...] = ()


def parse_capacity(entries: Any, origin: str) -> list[CapacitySpec]:
    if not isinstance(entries, list):
        raise UsageError(f"{origin}: `capacity` must be an array of tables ([[capacity]])")
    out: list[CapacitySpec] = []
    for i, e in enumerate(entries):
        where = f"{origin}#capacity[{i}]"
        if not isinstance(e, dict):
            raise UsageError(f"{where}: must be a table")
        unknown = set(e) - {*_STR_KEYS, "reasons"}
        if unknown:
            raise UsageError(f"{where}: unknown keys {sorted(unknown)}")
        for k in _STR_KEYS:
            if k in e and not isinstance(e[k], str):
                raise UsageError(f"{where}: `{k}` must be a string")
        shape = e.get("shape", "cut")
        if shape not in SHAPES:
            raise UsageError(f"{where}: shape must be one of {SHAPES}")
        need = ("name", "message", "fix") + (("asked", "effective") if shape == "cut" else ("parts", "share"))
        missing = [k for k in need if not e.get(k)]
        if missing:
            raise UsageError(f"{where}: needs {', '.join(f'`{k}`' for k in missing)}")
        reasons = []
        for j, r in enumerate(e.get("reasons", [])):
            if not isinstance(r, dict) or not isinstance(r.get("fact"), str) or not isinstance(r.get("why"), str):
                raise UsageError(f"{where}.reasons[{j}]: needs `fact` and `why` (strings)")
            if (
                set(r) - {"fact", "why", "fix", "unasked", "at_most"}
                or not isinstance(r.get("fix", ""), str)
                or not isinstance(r.get("unasked", False), bool)
                or not isinstance(r.get("at_most", 0), int)
            ):
                raise UsageError(
                    f"{where}.reasons[{j}]: only `fact`, `why`, `fix` (strings), `unasked` (bool), `at_most` (int)"
                )
            reasons.append(Reason(r["fact"], r["why"], r.get("fix"), bool(r.get("unasked", False)), r.get("at_most")))
        out.append(
            CapacitySpec(
                name=e["name"],
                shape=shape,
                message=e["message"],
                fix=e["fix"],
                source=where,
                knob=e.get("knob", ""),
                asked=e.get("asked"),
                effective=e.get("effective"),
                per_rank=e.get("per_rank"),
                per_rank_when=e.get("per_rank_when"),
                total=e.get("total"),
                parts=e.get("parts"),
                share=e.get("share"),
                limit=e.get("limit"),
                unless=e.get("unless"),
                why=e.get("why", ""),
                reasons=tuple(reasons),
            )
        )
    return out


METRIC_FIELDS = (
    "running",
    "queued",
    "kv_usage",
    "gen_tps",
    "gen_tokens",
    "accept_len",
    "accepted",
    "drafted",
    "drafts",
    "preemptions",
)


@dataclass(frozen=True, slots=True)
class ServingSpec:
    """An engine file's `[serving]` table: the flag that sets how many requests run at once (named in the
    findings' fixes) and its Prometheus /metrics names for each reading (the first name present wins)."""

    concurrency_flag: str = ""
    metrics: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def names(self, field: str) -> tuple[str, ...]:
        return next((n for f, n in self.metrics if f == field), ())


def parse_serving(table: Any, origin: str) -> ServingSpec | None:
    if table is None:
        return None
    where = f"{origin}#serving"
    if not isinstance(table, dict) or set(table) - {"concurrency_flag", "metrics", "note"}:
        raise UsageError(f"{where}: a table of `concurrency_flag` (string) and `metrics` (a table of arrays)")
    flag = table.get("concurrency_flag", "")
    metrics = table.get("metrics", {})
    if not isinstance(flag, str) or not isinstance(metrics, dict):
        raise UsageError(f"{where}: `concurrency_flag` must be a string and `metrics` a table")
    out = []
    for k, v in metrics.items():
        if k not in METRIC_FIELDS:
            raise UsageError(f"{where}.metrics: unknown reading {k!r} (known: {', '.join(METRIC_FIELDS)})")
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise UsageError(f"{where}.metrics.{k}: must be an array of metric names")
        out.append((k, tuple(v)))
    return ServingSpec(flag, tuple(out))
