"""Log prefixes of the servers bootwatch knows, parsed once here and nowhere else.

The prefixes are data (lines/formats.toml, which says how a line is read); this module compiles that table
and applies it. Each segment is peeled in three layers: collector wrappers (docker, kubectl, journald), then
process tags, which nest (vLLM's `(EngineCore_DP0 pid=7)`, torch's `[rank1]:`), then one logger's prefix. What
comes out is the time, level and process/rank the prefixes say, and the message after them.
"""

from __future__ import annotations

import calendar
import re
import string
import tomllib
from dataclasses import dataclass
from importlib import resources
from re import _parser as sre  # type: ignore[attr-defined]  # the stdlib's own regex parser, for first characters
from typing import Any

from bootwatch.lines.json_records import read_record
from bootwatch.lines.levels import LEVELS

_MONTHS = {
    m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)
}


@dataclass(slots=True)
class Prefix:
    text: str
    t: float | None = None
    level: str | None = None
    proc: str | None = None
    fmt: str | None = None
    ymd: tuple[int, int, int] | None = None  # to tell yearless vLLM stamps which year they are in
    more: tuple[str, ...] = ()  # further lines the one physical line holds (a JSON record's traceback)
    target: str | None = None  # Rust tracing's target (a module path): the crate names the program


_DAY_EPOCH: dict[tuple[int, int, int], float | None] = {}  # a log spans a few days: each is computed once


def _epoch(y: int, mo: int, d: int, h: int, mi: int, s: int) -> float | None:
    # timegm is linear in the time of day (only the date can be invalid), so the day's start is cached; -1.0
    # is no day's start (those are multiples of 86400) and says "not computed yet".
    day = _DAY_EPOCH.get((y, mo, d), -1.0)
    if day == -1.0:
        try:
            day = float(calendar.timegm((y, mo, d, 0, 0, 0, 0, 0, 0)))
        except (ValueError, OverflowError):
            day = None
        if len(_DAY_EPOCH) < 4096:
            _DAY_EPOCH[(y, mo, d)] = day
    return None if day is None else day + (h * 3600 + mi * 60 + s)


def _stamp(g: dict[str, str | None], year: int) -> float | None:
    y = int(g["Y"] or 0) if g.get("Y") else year
    mo = int(g["mo"] or 0) if "mo" in g else _MONTHS.get(g["mon"] or "")
    if mo is None:
        return None
    return _epoch(y, mo, int(g["d"] or 0), int(g["h"] or 0), int(g["mi"] or 0), int(g["s"] or 0))


def _ymd(g: dict[str, str | None]) -> tuple[int, int, int] | None:
    y, mo, d = g.get("Y"), g.get("mo"), g.get("d")
    return (int(y), int(mo), int(d or 0)) if y and mo else None


def _sglang_ranks(ranks: str) -> str | None:
    # "DP21 TP21 EP21" -> "TP21": the TP rank identifies the scheduler process uniquely within a node.
    parts = ranks.split()
    if not parts:
        return None
    for p in parts:
        if p.startswith("TP"):
            return p
    return parts[-1]


# ---- the compiled table ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Entry:
    """One pattern of formats.toml, compiled: a wrapper, a process tag or a logger format."""

    name: str
    pattern: re.Pattern[str]
    has_time: bool
    levels: dict[str, str]  # the format's own spellings over the shared table
    proc: str | None = None  # "rank{rank}"-style template, or "ranks"
    fmt: str | None = None  # a tag: the format it names
    keep_proc: bool = False  # a tag: an earlier tag's process wins
    keep_prefix: bool = False  # the prefix stays in the message, for rules that read it
    tag_names_format: bool = False  # a process tag before it names the format instead
    then: Entry | None = None  # a prefix that may follow this one and says the level
    yields_to: Entry | None = None  # a wrapper: not taken where this format matches and nothing follows it
    proc_fields: tuple[str, ...] = ()  # the groups `proc` names

    def level(self, m: re.Match[str]) -> str | None:
        lv = m.group("level")
        return None if lv is None else self.levels.get(lv, lv)

    def proc_of(self, m: re.Match[str]) -> str | None:
        if self.proc is None:
            return None
        if self.proc == "ranks":
            return _sglang_ranks(m.group("ranks"))
        values = {k: m.group(k) for k in self.proc_fields}
        if None in values.values():
            return None
        return self.proc.format_map(values).replace(" ", "_").replace("=", "")


def first_chars(pattern: str) -> tuple[frozenset[str], bool]:
    """The characters a match of `pattern` can start with, and whether any digit (\\d) can start one."""
    chars, digit, nullable = _firsts(sre.parse(pattern).data)
    if nullable:
        raise ValueError(f"pattern can match nothing, so it has no first character: {pattern!r}")
    return frozenset(chars), digit


def _firsts(items: list[tuple[Any, Any]]) -> tuple[set[str], bool, bool]:
    chars: set[str] = set()
    digit = False
    for op, av in items:
        if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
            continue  # zero-width: the next item says the first character
        if op is sre.LITERAL:
            return chars | {chr(av)}, digit, False
        if op is sre.IN:
            for o, a in av:
                if o is sre.LITERAL:
                    chars.add(chr(a))
                elif o is sre.RANGE:
                    chars.update(map(chr, range(a[0], a[1] + 1)))
                elif o is sre.CATEGORY and a is sre.CATEGORY_DIGIT:
                    digit = True
                elif o is sre.CATEGORY and a is sre.CATEGORY_SPACE:
                    chars.update(" \t\n\r\f\v")
                else:
                    raise ValueError(f"a pattern must start with known characters, not {o} {a}")
            return chars, digit, False
        if op is sre.SUBPATTERN or op in (sre.MAX_REPEAT, sre.MIN_REPEAT) or op is sre.BRANCH:
            alts = [av[3]] if op is sre.SUBPATTERN else [av[2]] if op is not sre.BRANCH else av[1]
            nullable = op is not sre.SUBPATTERN and op is not sre.BRANCH and av[0] == 0
            for alt in alts:
                c, d, n = _firsts(alt.data if hasattr(alt, "data") else alt)
                chars |= c
                digit |= d
                nullable |= n
            if not nullable:
                return chars, digit, False
            continue
        raise ValueError(f"a pattern must start with a literal, a class or a group, not {op}")
    return chars, digit, True


def _entries(spec: dict[str, Any], formats: dict[str, Entry]) -> list[Entry]:
    """One table entry's patterns, compiled (a `then` or `yields_to` names a format already in `formats`)."""
    proc = spec.get("proc")
    fields = tuple(f for _, f, _, _ in string.Formatter().parse(proc) if f) if proc and proc != "ranks" else ()
    out = []
    for p in _patterns(spec):
        rx = re.compile(p)
        has_time = "mo" in rx.groupindex or "mon" in rx.groupindex
        levels = {**LEVELS, **spec.get("levels", {})}
        then, yields = (formats[spec[k]] if k in spec else None for k in ("then", "yields_to"))
        says = proc if all(f in rx.groupindex for f in fields) else None  # a pattern without the rank names none
        out.append(
            Entry(
                spec["name"],
                rx,
                has_time,
                levels,
                says,
                spec.get("fmt"),
                keep_proc=spec.get("keep_proc", False),
                keep_prefix=spec.get("keep_prefix", False),
                tag_names_format=spec.get("tag_names_format", False),
                then=then,
                yields_to=yields,
                proc_fields=fields,
            )
        )
    return out


def _patterns(spec: dict[str, Any]) -> list[str]:
    return spec["pattern"] if isinstance(spec["pattern"], list) else [spec["pattern"]]


@dataclass(frozen=True, slots=True)
class Table:
    wrappers: tuple[Entry, ...]
    any_wrapper: re.Pattern[str]  # any wrapper at all, in one match: most lines have none
    wrap_first: frozenset[str]
    tags: tuple[Entry, ...]
    formats: tuple[Entry, ...]
    by_first: dict[str, tuple[Entry, ...]]  # formats tried for a line, by its first character
    digit_first: tuple[Entry, ...]  # ... and for one starting with any other digit
    glued: re.Pattern[str]  # where a new record can start after a progress bar without a newline


def _ungrouped(pattern: str) -> str:
    return re.sub(r"\(\?P<\w+>", "(?:", pattern)


def _dispatch(entries: tuple[Entry, ...]) -> tuple[dict[str, tuple[Entry, ...]], tuple[Entry, ...]]:
    by_first: dict[str, list[Entry]] = {}
    digit_first = []
    for e in entries:
        chars, digit = first_chars(e.pattern.pattern)
        for c in chars | (set("0123456789") if digit else set()):
            by_first.setdefault(c, []).append(e)
        if digit:
            digit_first.append(e)
    return {c: tuple(v) for c, v in by_first.items()}, tuple(digit_first)


def compile_table(doc: dict[str, Any]) -> Table:
    """formats.toml, compiled: every pattern, the first-character dispatch, the wrapper gate."""
    named: dict[str, Entry] = {}
    compiled: dict[int, list[Entry]] = {}
    for plain in (True, False):  # formats another one points at (by `then`) first
        for i, spec in enumerate(doc["format"]):
            if ("then" not in spec) == plain:
                compiled[i] = _entries(spec, named)
                named.setdefault(spec["name"], compiled[i][0])
    formats = tuple(e for i in sorted(compiled) for e in compiled[i])
    wrappers = tuple(e for spec in doc["wrapper"] for e in _entries(spec, named))
    tags = tuple(e for spec in doc["tag"] for e in _entries(spec, named))
    by_first, digit_first = _dispatch(formats)
    wrap_first = frozenset(c for e in wrappers for c in _dispatch((e,))[0])
    glued = [p for kind in ("wrapper", "tag", "format") for s in doc[kind] if s.get("glued") for p in _patterns(s)]
    return Table(
        wrappers,
        re.compile("|".join(_ungrouped(e.pattern.pattern) for e in wrappers)),
        wrap_first,
        tags,
        formats,
        by_first,
        digit_first,
        re.compile("|".join(map(_ungrouped, glued))),
    )


def load_table() -> Table:
    with resources.files("bootwatch.lines").joinpath("formats.toml").open("rb") as f:
        return compile_table(tomllib.load(f))


TABLE = load_table()
_WRAPPERS, _ANY_WRAP, _WRAP_FIRST = TABLE.wrappers, TABLE.any_wrapper, TABLE.wrap_first
_TAGS, _BY_FIRST, _DIGIT_FIRST = TABLE.tags, TABLE.by_first, TABLE.digit_first


# ---- reading a line ----------------------------------------------------------------------------------
def _formats_at(first: str) -> tuple[Entry, ...]:
    # isdigit beyond 0-9: \d in the patterns matches any script's digits too.
    return _BY_FIRST.get(first) or (_DIGIT_FIRST if first.isdigit() else ())


def _peel_wrappers(text: str, year: int) -> tuple[int, float | None]:
    """Where the server's own text starts after collector prefixes, and the time a collector stamped."""
    pos, t = 0, None
    for _ in range(3):  # compose around timestamps, or the other way round
        if _ANY_WRAP.match(text, pos) is None:
            break
        for w in _WRAPPERS:
            m = w.pattern.match(text, pos)
            if m is None:
                continue
            if w.yields_to is not None and w.yields_to.pattern.match(text, pos):
                end = m.end()
                if not any(f.pattern.match(text, end) for f in _formats_at(text[end : end + 1])):
                    continue  # the server's own prefix, not a collector's
            pos = m.end()
            if w.has_time and (st := _stamp(m.groupdict(), year)) is not None:
                t = st
            break
        else:
            break
    return pos, t


def parse_prefix(text: str, year: int) -> Prefix:
    """Peel collector wrappers, process tags and one logger prefix off `text`; `year` fills in yearless stamps
    (vLLM)."""
    first = text[:1]
    pos, wrap_t = _peel_wrappers(text, year) if first in _WRAP_FIRST or first.isdigit() else (0, None)
    if text[pos : pos + 1] == "{" and (record := read_record(text[pos:], year)) is not None:
        return Prefix(record.message, record.t or wrap_t, record.level, None, "json", None, record.more)
    p = _parse_from(text, pos, year)
    if p.fmt is None and pos == 0 and first in " \t":
        # A paste indented as a whole (a quote block, a markdown list item's two or three spaces; LM Studio's one space
        # before each message below its time and level line): the prefix is
        # there after the indentation. Only taken when one is found, so that traceback frames keep theirs.
        lead = len(text) - len(text.lstrip(" \t"))
        if lead >= 1:
            q = parse_prefix(text[lead:], year)
            if q.fmt is not None:
                return q
    if p.t is None and wrap_t is not None:
        p.t = wrap_t
    return p


def _parse_from(text: str, pos: int, year: int) -> Prefix:
    pos, proc, fmt = _peel_process_tags(text, pos)
    for f in _formats_at(text[pos : pos + 1]):
        m = f.pattern.match(text, pos)
        if m:
            return _read(f, m, text, pos, year, proc, fmt)
    return Prefix(text[pos:], None, None, proc, fmt)


def _peel_process_tags(text: str, pos: int) -> tuple[int, str | None, str | None]:
    """Past the process tags (they nest and repeat): where the logger prefix starts, the process they name,
    and the format a tag names."""
    proc, fmt = None, None
    while True:
        for tag in _TAGS:
            m = tag.pattern.match(text, pos)
            if m:
                proc = (proc or tag.proc_of(m)) if tag.keep_proc else tag.proc_of(m)
                fmt, pos = tag.fmt or fmt, m.end()
                break
        else:
            return pos, proc, fmt


def _read(f: Entry, m: re.Match[str], text: str, pos: int, year: int, proc: str | None, fmt: str | None) -> Prefix:
    # The hot path (every prefixed line that reaches Python): one groupdict, no method calls it can spare.
    g = m.groupdict()
    t = _stamp(g, year) if f.has_time else None
    name = (fmt or f.name) if f.tag_names_format else f.name
    level, rest = g.get("level"), m.end()
    if level is not None:
        level = f.levels.get(level, level)
    if f.then is not None and (inner := f.then.pattern.match(text, rest)):
        # the inner prefix says the level; the line is still the outer logger's (SGLang's stamp on uvicorn's
        # lines is SGLang's evidence: a watcher that starts at them must not take uvicorn's readiness)
        level, rest = f.then.level(inner), inner.end()
    own = f.proc_of(m) if f.proc is not None else None
    return Prefix(
        text[pos:] if f.keep_prefix else text[rest:],
        t,
        level,
        own or proc,
        name,
        _ymd(g) if f.has_time else None,
        target=g.get("target"),
    )
