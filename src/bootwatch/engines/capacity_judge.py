"""Asked versus effective capacity, from a launch's facts and its engine's `[[capacity]]` tables
(engines/capacity.py). A value counts as cut only when it is below what the engine's own arithmetic makes of
what was asked: SGLang with DP attention runs `max_running_requests // dp_size` per rank, and that is no cut."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bootwatch.engines.capacity import CapacitySpec, Reason


@dataclass(frozen=True, slots=True)
class Cap:
    """One capacity fact judged: the value the engine runs (per rank or slot) and, when it is lower than asked
    or the engine says it lowered it, the words for it."""

    kind: str
    effective: int
    expected: int | None  # what the arithmetic makes of what was asked (per rank, per slot); None: nothing asked
    cut: bool  # below what the arithmetic gives
    lowered: bool  # cut, or the engine says why it is lower (its own line: speculative default, mamba state)
    evidence: str
    fix: str
    line_no: int | None


class _Vars(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "?"


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _true(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.strip("'\"").lower() in ("true", "1", "yes", "on"))


def _fill(template: str, values: dict[str, Any]) -> str:
    """The template with the facts in; a parenthesis whose fact is not known yet is left out."""
    return template.format_map(_Vars(values)).replace(" (?)", "")


def _reason(spec: CapacitySpec, facts: dict[str, Any], asked: int | None, eff: int | None) -> Reason | None:
    """The first reason the facts show: its fact known, and its conditions (nothing asked, a value this low) met."""
    for r in spec.reasons:
        if facts.get(r.fact) is None or (r.unasked and asked is not None):
            continue
        if r.at_most is not None and (eff is None or eff > r.at_most):
            continue
        return r
    return None


def _cut(spec: CapacitySpec, facts: dict[str, Any], lines: dict[str, int]) -> Cap | None:
    assert spec.asked is not None and spec.effective is not None
    eff = _int(facts.get(spec.effective))
    asked = _int(facts.get(spec.asked))
    reason = _reason(spec, facts, asked, eff)
    if reason is not None and (cap := _int(facts.get(reason.fact))) is not None:
        eff = cap if eff is None else min(eff, cap)  # the engine's own line names a lower cap
    if eff is None:
        return None
    divisor = 1
    if spec.per_rank and (spec.per_rank_when is None or _true(facts.get(spec.per_rank_when))):
        divisor = max(1, _int(facts.get(spec.per_rank)) or 1)
    expected = asked // divisor if asked is not None else None
    cut = expected is not None and eff < expected
    values = {
        **facts,
        "asked": asked if asked is not None else "no explicit value",
        "effective": eff,
        "expected": expected,
        "divisor": divisor,
        "per_rank": f" per rank ({asked} over {spec.per_rank} {divisor})" if divisor > 1 else "",
    }
    why = _fill(reason.why if reason else spec.why, values)
    where = [lines[n] for n in (spec.asked, spec.effective, reason.fact if reason else "") if n in lines]
    if cut:
        evidence = _fill(spec.message, values) + (f": {why}" if why else "")
    else:  # nothing asked was cut, but the engine's own line (or default) says why the value is this low
        evidence = f"{spec.knob or spec.effective} is {eff}{values['per_rank']}: {why}"
    if where:
        evidence += " (line" + ("s " if len(set(where)) > 1 else " ") + ", ".join(map(str, sorted(set(where)))) + ")"
    fix = _fill((reason.fix if reason and reason.fix else spec.fix), values)
    line = lines.get(reason.fact if reason else spec.effective, lines.get(spec.effective))
    return Cap(spec.name, eff, expected, cut, cut or reason is not None, evidence, fix, line)


def _split(spec: CapacitySpec, facts: dict[str, Any], lines: dict[str, int]) -> Cap | None:
    assert spec.parts is not None and spec.share is not None
    parts, share = _int(facts.get(spec.parts)), _int(facts.get(spec.share))
    if parts is None or share is None or parts <= 1 or (spec.unless and _true(facts.get(spec.unless))):
        return None
    total = _int(facts.get(spec.total)) if spec.total else None
    total = total if total is not None else parts * share
    limit = _int(facts.get(spec.limit)) if spec.limit else None
    if share >= total or (limit is not None and share >= limit):
        return None
    values = {**facts, "parts": parts, "share": share, "total": total, "limit": limit if limit is not None else "?"}
    where = sorted({lines[n] for n in (spec.parts, spec.share, spec.total or "") if n in lines})
    evidence = _fill(spec.message, values)
    if where:
        evidence += " (line" + ("s " if len(where) > 1 else " ") + ", ".join(map(str, where)) + ")"
    return Cap(spec.name, share, None, True, True, evidence, _fill(spec.fix, values), lines.get(spec.share))


def judge(specs: list[CapacitySpec], facts: dict[str, Any], lines: dict[str, int]) -> list[Cap]:
    """Every capacity fact of the launch that can be judged yet (the facts come in as the startup goes)."""
    out = []
    for spec in specs:
        c = _cut(spec, facts, lines) if spec.shape == "cut" else _split(spec, facts, lines)
        if c is not None:
            out.append(c)
    return out


def startup_warnings(launch: Any) -> list[dict[str, Any]]:
    """The cuts and splits said at startup, as warnings (each kind once per launch, like every warning)."""
    specs = getattr(launch.rules, "capacity", None) or []
    return [
        {
            "kind": c.kind,
            "line_no": c.line_no if c.line_no is not None else launch.last_no,
            "text": f"{c.evidence}. Fix: {c.fix}",
        }
        for c in judge(specs, launch.facts, launch.fact_lines)
        if c.lowered and c.kind not in launch.warned
    ]
