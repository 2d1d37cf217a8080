"""Typed samples of a serving server, from the numbers a `stats` rule's named groups captured."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class Source(StrEnum):
    LOG = "log"
    METRICS = "metrics"


@dataclass(slots=True)
class ServingSample:
    """One reading. A field is None when this reading does not say (a prefill line has no throughput)."""

    t: float | None
    source: Source
    kind: str  # the rule's name: decode, prefill, interval, spec, timing, success, retract, jit, scrape
    line_no: int | None = None
    proc: str | None = None  # the rank or process that printed it (SGLang's DP ranks each print their own)
    running: int | None = None
    queued: int | None = None
    kv_usage: float | None = None  # 0..1
    gen_tps: float | None = None  # generated tokens per second
    prompt_tps: float | None = None
    accept_len: float | None = None  # mean tokens per verification step, bonus token included (1 = no gain)
    accept_rate: float | None = None  # 0..1, accepted draft tokens / drafted
    accepted: int | None = None  # draft tokens in this interval
    drafted: int | None = None
    preemptions: int | None = None  # cumulative (vLLM) or in this reading (SGLang's retractions)
    swapped: int | None = None
    # a request's outcome (kind "request"): the HTTP status of an access line, or an engine's request-error line
    # with its cause (the rule's), the words for it (the rule's message, filled) and what fixes it
    status: int | None = None
    path: str | None = None
    cause: str | None = None
    said: str | None = None
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if v is not None}
        d["source"] = self.source.value
        for k in ("kv_usage", "gen_tps", "prompt_tps", "accept_len", "accept_rate"):
            if k in d:
                d[k] = round(d[k], 3)
        return d


_INTS = frozenset(
    {"running", "queued", "accepted", "drafted", "preemptions", "swapped", "retracted", "eval_tokens", "status"}
)
_FLOATS = frozenset(
    {
        "kv_usage",
        "gen_tps",
        "prompt_tps",
        "accept_len",
        "accept_rate",
        "kv_usage_pct",
        "eval_ms",
        "time_per_token",
    }
)
_UNIT_S = {"s": 1.0, "ms": 1e-3, "µs": 1e-6}


class _Missing(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "?"


def from_groups(
    kind: str,
    groups: dict[str, str],
    t: float | None,
    line_no: int | None,
    proc: str | None,
    cause: str | None = None,
    message: str | None = None,
    fix: str | None = None,
    facts: dict[str, Any] | None = None,
) -> ServingSample:
    """The named groups of a `stats` rule (strings) as a sample; engine-specific shapes become the same fields."""
    ints: dict[str, int] = {}
    floats: dict[str, float] = {}
    for k, v in groups.items():  # one pass: a stats line is read for every reading of a serving server
        if v:
            if k in _INTS:
                ints[k] = int(v)
            elif k in _FLOATS:
                floats[k] = float(v)
    s = ServingSample(t, Source.LOG, kind, line_no, proc)
    s.running, s.queued, s.swapped = ints.get("running"), ints.get("queued"), ints.get("swapped")
    s.accepted, s.drafted = ints.get("accepted"), ints.get("drafted")
    s.preemptions = ints.get("preemptions", ints.get("retracted"))
    s.kv_usage = floats.get("kv_usage")
    if "kv_usage_pct" in floats:
        s.kv_usage = floats["kv_usage_pct"] / 100
    s.gen_tps, s.prompt_tps = floats.get("gen_tps"), floats.get("prompt_tps")
    s.accept_len, s.accept_rate = floats.get("accept_len"), floats.get("accept_rate")
    if s.accept_rate is None and s.accepted is not None and s.drafted:
        s.accept_rate = s.accepted / s.drafted
    if kind == "request":
        s.status, s.path = ints.get("status"), groups.get("path")
        s.cause = cause or (f"HTTP {s.status}" if s.status is not None and s.status >= 400 else None)
        if s.cause is not None:
            values = _Missing({**{k: str(v) for k, v in (facts or {}).items()}, **groups})
            s.said = message.format_map(values) if message else None
            s.fix = fix.format_map(values) if fix else None
    if "time_per_token" in floats:  # TGI: per request
        per = floats["time_per_token"] * _UNIT_S.get(groups.get("time_per_token_unit") or "s", 1.0)
        s.gen_tps = 1.0 / per if per > 0 else None
    return s
