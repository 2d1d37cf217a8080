"""What a launch is configured as and what it warns of: flags, facts and warnings.

Flags are names the engine's rules set (a mode a later rule depends on). Facts are values read from the
lines (model, parallelism, KV cache size, engine version …), from argument dumps too: a benign line is no
evidence of failure, but it still has facts. Warnings are a rule's, or `derived`'s, which reads them from
the facts together; each kind is reported once per launch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bootwatch.tracker import derived
from bootwatch.tracker.context import LineContext
from bootwatch.tracker.events import Event, FactEvent, WarningEvent
from bootwatch.tracker.launch import Launch

if TYPE_CHECKING:
    from bootwatch.tracker.tracker import Tracker


def flags(tracker: Tracker, ctx: LineContext) -> None:
    launch = ctx.launch
    for r in ctx.sel.get("flag", ()):
        launch.flags.add(r.name or "")
        if r.load and launch.ready is not None:
            launch.load_pending = True  # a model load of a server already up: its ready line is the latest load's


def facts(tracker: Tracker, ctx: LineContext) -> None:
    """Facts in the line's named groups (a rule's `value` group takes the rule's name); a fact that changes
    is an event, and facts may add up to a warning."""
    rules = ctx.sel.get("fact")
    if not rules:
        return
    launch, line, ev = ctx.launch, ctx.line, ctx.events
    hit = False
    for r in rules:
        m = r.regex.search(line.text)
        if not m:
            continue
        hit = True
        groups = {k: v for k, v in m.groupdict().items() if v is not None}
        if r.name and "value" in groups:
            groups = {r.name: groups.pop("value"), **groups}
        for name, raw in groups.items():
            val = _value(raw)
            if val is None:
                continue
            if launch.facts.get(name) != val:
                launch.facts[name] = val
                launch.fact_lines[name] = line.no
                ev.append(FactEvent(t=line.t, name=name, value=val, line_no=line.no))
    if hit:
        ctx.matched = True
        for w in derived.check(launch):
            warn(launch, w["kind"], w["line_no"], w["text"], line.t, ev)


def warnings(tracker: Tracker, ctx: LineContext) -> None:
    for r in ctx.sel.get("warning", ()):  # rules come from the RE2 set's hits: they matched this message already
        line = ctx.line
        text = r.message.format(line=line.text) if r.message else line.text
        warn(ctx.launch, r.name or "warning", line.no, text, ctx.t, ctx.events)
        ctx.matched = True
        return


def warn(launch: Launch, kind: str, no: int, text: str, t: float | None, ev: list[Event]) -> None:
    if kind in launch.warned:
        return
    launch.warned.add(kind)
    w = {"line_no": no, "kind": kind, "text": text}
    launch.warnings.append(w)
    ev.append(WarningEvent.of(t, w))


def _value(raw: str) -> Any:
    s = raw.strip().strip("'\"")
    if s in ("None", "null", ""):
        return None
    if s in ("True", "False"):
        return s == "True"
    try:
        return int(s.replace(",", ""))
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s
