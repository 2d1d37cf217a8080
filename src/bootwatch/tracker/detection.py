"""Which engine a launch is, by weight of evidence, and so which of a line's rule hits count.

Every line may carry evidence: a banner, an argument dump, a prefix only one engine prints, a module path
in a traceback. The engine with the most evidence so far wins, and may still change until the launch is
ready: then the lines read under the engine it seemed to be are judged again by the real one's rules
(which is why lines some engine calls evidence are kept). A launch that began at its engine's own banner
keeps that engine: other engines' lines are its children's.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bootwatch.engines.prefilter import SHELL_PROMPT
from bootwatch.engines.rules import Rule, RuleBook
from bootwatch.lines import Line
from bootwatch.lines.prefixes import TABLE
from bootwatch.tracker.context import LineContext
from bootwatch.tracker.evidence import judge
from bootwatch.tracker.launch import Launch
from bootwatch.tracker.phasing import mark_ready

if TYPE_CHECKING:
    from bootwatch.tracker.tracker import Tracker

DETECT_REPEAT = 3  # times one detect rule counts in a launch
FMT_MAX = 2  # evidence a prefix family can give at most
FMT_MAX_OF = {"slog": 6}  # a Go server's slog records with their source files are Ollama's through and through
TARGET_WEIGHT = 2  # a crate only one engine logs from outweighs the tracing format (TGI's, 1 a line)
SERVICE_WEIGHT = (
    1  # a compose service named after an engine ("localai-api-1  | "): what its user called it, the least of evidence
)
COMMAND_WEIGHT = 2  # the command a pasted shell prompt ran: what printed the lines below it, as a detect line says
REVOKE_WEIGHT = 2  # evidence of a known engine that overrules readiness read with generic rules
EVIDENCE_KINDS = frozenset({"fatal", "suspect", "detail"})
_PROMPT = re.compile(SHELL_PROMPT)
# docker compose's "service-1  | ", as formats.toml knows it
_SERVICE = next(w.pattern for w in TABLE.wrappers if w.name == "compose")


def prefix_engines(book: RuleBook) -> dict[str, str]:
    """Prefix families only one engine prints (its rule file's `formats`): evidence of that engine."""
    return {f: name for name, er in book.engines.items() for f in er.formats}


def target_engines(book: RuleBook) -> dict[str, str]:
    """Rust crates only one engine logs from (its rule file's `targets`): a tracing target's crate is its evidence."""
    return {c: name for name, er in book.engines.items() for c in er.targets}


def detect_positions(book: RuleBook) -> dict[int, list[int]]:
    """Where each detect rule is in the book's list of (engine, rule) pairs: a line's hits find theirs at
    once instead of going through all of them."""
    at: dict[int, list[int]] = {}
    for i, (_, rule) in enumerate(book.detect):
        at.setdefault(id(rule), []).append(i)
    return at


# ---- steps -----------------------------------------------------------------------------------------
def detect(tracker: Tracker, ctx: LineContext) -> None:
    """Weigh the evidence of every line (banners, argument dumps, prefixes, module paths in tracebacks):
    the engine with the most evidence so far wins, and may still change until the launch is ready."""
    launch = ctx.launch
    if launch.forced_engine:
        return
    if (ctx.line.fmt or "") in tracker.fmt_engine:
        _weigh_prefix(tracker, launch, ctx.line)
    if ctx.line.target is not None and tracker.target_engine:
        _weigh_target(tracker, launch, ctx.line.target)
    if ctx.hits:
        _weigh_detect_rules(tracker, launch, ctx.hits)
    if ctx.line.fmt is None:
        _weigh_command(tracker, launch, ctx.line)
    if ctx.line.raw.find(" | ", 0, 72) > 0:
        _weigh_service(tracker, launch, ctx.line)
    scores = launch.scores
    if launch.engine_by_banner and not _parent_outweighs(tracker, launch):
        return  # the launch began with this engine's own banner: other engines' lines are its children's
    best, weight = launch.engine, scores.get(launch.engine, 0)
    if not scores or max(scores.values()) <= weight:
        return  # no engine has more evidence than this one (the common case: no need to look at each)
    for engine in tracker.book.engines:
        if scores.get(engine, 0) > weight:
            best, weight = engine, scores[engine]
    if best == launch.engine:
        return
    if launch.ready is not None:
        if launch.ready_engine != "unknown" or weight < REVOKE_WEIGHT:
            return
        _revoke_ready(launch)
    launch.engine, launch.rules = best, tracker.book.for_engine(best)
    _rejudge(tracker, launch, ctx.line)
    _ready_just_before(tracker, launch, ctx)


def select(tracker: Tracker, ctx: LineContext) -> None:
    """The line's hits that belong to the launch's engine (now that this line's evidence is weighed)."""
    if ctx.hits:
        ctx.sel = sel = rules_of(tracker.book, ctx.launch, ctx.hits)
        ctx.benign = bool(sel.get("benign"))
    ctx.starting = ctx.launch.ready is None


def keep_for_rejudging(tracker: Tracker, ctx: LineContext) -> None:
    """Lines some engine's rules call evidence, kept to judge again if the engine turns out another one."""
    if ctx.hits and any(r.kind in EVIDENCE_KINDS for r in ctx.hits):
        ctx.launch.evidence_lines.append((ctx.line, ctx.hits))


# ---- helpers ---------------------------------------------------------------------------------------
def rules_of(book: RuleBook, launch: Launch, hits: list[Rule]) -> dict[str, list[Rule]]:
    """The matched rules that belong to this launch's engine, by kind, in the order of its files."""
    pos = book.positions.get(launch.engine) or book.positions["unknown"]
    if len(hits) == 1:  # most lines: nothing to sort
        r = hits[0]
        return {r.kind: [r]} if pos.get(id(r)) is not None else {}
    kinds: dict[str, list[tuple[int, Rule]]] = {}
    for r in hits:
        p = pos.get(id(r))
        if p is not None:
            kinds.setdefault(r.kind, []).append((p, r))
    return {k: [r for _, r in sorted(v, key=lambda x: x[0])] for k, v in kinds.items()}


def _parent_outweighs(tracker: Tracker, launch: Launch) -> bool:
    """An engine that runs the banner's engine in-process (a Dynamo worker embedding vLLM) and has more evidence:
    the banner was its child's."""
    mine = launch.scores.get(launch.engine, 0)
    return any(
        launch.engine in tracker.book.for_engine(e).runs and w > mine
        for e, w in launch.scores.items()
        if e != launch.engine
    )


def _weigh_prefix(tracker: Tracker, launch: Launch, line: Line) -> None:
    """A prefix only one engine prints counts, but a flood of prefixed lines never outweighs banners."""
    fmt = line.fmt or ""
    engine = tracker.fmt_engine.get(fmt)
    if engine is None:
        return
    _count(launch, "format " + fmt, FMT_MAX_OF.get(fmt, FMT_MAX), engine, 1)


def _weigh_target(tracker: Tracker, launch: Launch, target: str) -> None:
    """A tracing target's crate only one engine logs from ("mistralrs_core::engine"): it counts as a detect line of
    weight 2 does, a few times at most. The format removes the target from the message, so no rule sees it there."""
    crate = target.split("::", 1)[0]
    engine = tracker.target_engine.get(crate)
    if engine is None:
        return
    _count(launch, "target " + crate, DETECT_REPEAT, engine, TARGET_WEIGHT)


def _weigh_command(tracker: Tracker, launch: Launch, line: Line) -> None:
    """A pasted shell prompt and the command it ran (`$ text-generation-launcher --env`): the program that printed
    what follows, by the engines' `commands` patterns, the ones `run` knows its child by."""
    m = _PROMPT.match(line.raw.lstrip())
    if m is None:
        return
    engine = tracker.book.engine_of_command([m.group("command")])
    if engine is not None:
        _count(launch, "command " + engine, DETECT_REPEAT, engine, COMMAND_WEIGHT)


def _weigh_service(tracker: Tracker, launch: Launch, line: Line) -> None:
    """docker compose's service name before the line, when a word of it (or two joined: "llama-cpp") is an engine's
    name: "localai-api-1", "vllm-openai-1", "tgi-1". Outweighed by any line the engine prints itself."""
    m = _SERVICE.match(line.raw)
    if m is None:
        return
    words = [w for w in re.split(r"[-_.]", m.group().split()[0].lower()) if w]
    names = (
        [a + b for a, b in zip(words, words[1:], strict=False)]
        + [a + "_" + b for a, b in zip(words, words[1:], strict=False)]
        + words
    )
    for name in names:  # two words first: "sglang-router" is the router's, not SGLang's
        if name in tracker.book.engines and name != "unknown":
            _count(launch, "service", 1, name, SERVICE_WEIGHT)
            return


def _count(launch: Launch, key: str, most: int, engine: str, weight: int) -> None:
    """One more piece of `engine`'s evidence of kind `key`, unless that kind has counted `most` times already."""
    seen = launch.detect_hits.get(key, 0)
    if seen < most:
        launch.detect_hits[key] = seen + 1
        launch.scores[engine] = launch.scores.get(engine, 0) + weight


def _weigh_detect_rules(tracker: Tracker, launch: Launch, hits: list[Rule]) -> None:
    at = tracker.detect_at
    found = {i for r in hits if r.kind == "detect" for i in at.get(id(r), ())}
    detect = tracker.book.detect
    for i in sorted(found):  # in the book's order, as if each of its detect rules were looked at
        engine, rule = detect[i]
        # One kind of line counts a few times at most: a long dump of one library's lines (ggml's
        # print_info) must not outweigh a few lines only one program prints.
        _count(launch, rule.source, DETECT_REPEAT, engine, rule.weight)


def _ready_just_before(tracker: Tracker, launch: Launch, ctx: LineContext) -> None:
    """The line just before this one is the real engine's readiness, read while the engine seemed another: a
    banner whose first line is readiness and whose second names the server (LocalAI's Fiber box: its top
    border, then 'Fiber v2.44.0'). Only the line just before: an older one has had lines after it that a ready
    server would not have printed unnoticed."""
    prev = launch.prev
    # (by number: the prefilter keeps lines no rule matches from the tracker, so the last line seen may be older)
    if prev is None or launch.ready is not None or launch.dying is not None or prev[0].no != ctx.line.no - 1:
        return
    line, hits, t, log_t = prev
    for r in rules_of(tracker.book, launch, hits).get("ready", ()):
        if r.back or not r.allowed(launch.flags):
            continue
        mark_ready(launch, line, t, ctx.events, r.message, log_t)
        return


def _revoke_ready(launch: Launch) -> None:
    """Readiness came from a generic uvicorn line, but this is a known engine whose readiness means more
    (SGLang warms up after uvicorn starts): that line was not readiness."""
    launch.ready = None
    launch.ready_engine = None
    if launch.phases and launch.phases[-1].name == "ready":
        launch.phases.pop()
        if launch.phases:
            launch.phases[-1].end_line = launch.phases[-1].end_t = launch.phases[-1].end_log_t = None


def _rejudge(tracker: Tracker, launch: Launch, current: Line) -> None:
    """Lines read under the engine it seemed to be: what the real engine's rules call evidence counts.
    Nothing is decided here: a verdict comes from the usual places."""
    if launch.ready is not None:
        return
    known = {c.line_no for c in launch.candidates}
    for line, hits in launch.evidence_lines:
        if line is current or line.no in known:
            continue
        sel = rules_of(tracker.book, launch, hits)
        if not sel.get("benign"):
            judge(tracker, launch, sel, line, line.t)
