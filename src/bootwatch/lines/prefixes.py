"""Log prefixes of the servers bootwatch knows, parsed once here and nowhere else.

Each parser takes the ANSI-free text of one segment and returns what the prefix says (time, level,
process/rank) and the message after it. Process tags nest: vLLM puts `(EngineCore_DP0 pid=7)` before its
logger prefix, Ray puts `(Actor pid=1, ip=..)` before SGLang's `[time TP0]`, torch puts `[rank1]:` before a
traceback line; so tags are peeled off first and then one logger format is matched.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass

from bootwatch.lines.json_records import read_record
from bootwatch.lines.levels import LEVELS, level_name

# (EngineCore_DP0 pid=123) (VllmWorker rank=1 pid=9) (Worker_TP1 pid=5) (RayWorkerWrapper pid=3, ip=10.0.0.1)
_PROC_TAG = re.compile(r"\((?P<name>[A-Za-z_][\w\-]*(?: [\w=]+)*?) pid=(?P<pid>\d+)(?:, ip=[\d.:a-f]+)?\) ?")
# torch's per-rank stderr prefix: "[rank1]: "
_TORCH_RANK = re.compile(r"\[rank(?P<rank>\d+)\]:\s?")
# vLLM logger, V1 "[file.py:12]" and V0 "file.py:12]"
_VLLM = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<mo>\d\d)-(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)"
    r"(?:\.\d+)? \[?[\w.\-/]+:\d+\] ?"
)
# SGLang "[2025-01-02 10:00:00 DP1 TP3 EP3] " (ranks optional, .mmm optional), 2026 adds "INFO file.py:12: "
_SGLANG = re.compile(
    r"\[(?P<Y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:\.\d+)?"
    r"(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP|CP)\d+)*)\] ?"
    r"(?:(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+:\d+: )?"
)
# uvicorn "INFO:     Started server process", also re-formatted under SGLang's "[ts] INFO:     "
_UVICORN = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL|TRACE):\s{2,}")
# Python logging default "WARNING:root:msg"
_PYLOG = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:")
# TGI / Rust tracing "2025-07-04T12:35:02.586768Z  INFO text_generation_launcher: "
_TGI = re.compile(
    r"(?P<Y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)T(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:\.\d+)?Z\s+"
    r"(?P<level>TRACE|DEBUG|INFO|WARN|ERROR)\s+(?:[a-z_][\w\-]*(?:::[\w\-]+)*(?:\{[^}]*\})?:\s)*(?:[\w/.\-]+\.rs:\d+:\s)?"
)
# Python logging "2025-07-08 11:19:52,247 - lmdeploy - WARNING - archs.py:51 - " (also CUTE_DSL, wrappers)
_PYFMT = re.compile(
    r"(?P<Y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d),\d{3} - (?:(?P<name>[\w.\-]+) - )?"
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) - (?:[\w.]+:\d+ - |\[[\w.]+\] - )?"
)
# TensorRT-LLM "[12/20/2025-03:35:50] [TRT-LLM] [I] ", "[TRT-LLM AUTO-DEPLOY] [RANK 0] [I]", "[TensorRT-LLM][INFO] "
_TRTLLM = re.compile(
    r"\[(?P<mo>\d\d)/(?P<d>\d\d)/(?P<Y>\d{4})-(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)\] \[TRT-LLM[^\]]*\]"
    r"(?: \[RANK (?P<rank>\d+)\])? \[(?P<level>[IWEVD])\] "
)
# TurboMind (LMDeploy's C++ engine): "[TM][ERROR] msg", "[TM][FATAL][0914.14:00:37.807188][cast.cu:264] msg"
_TM = re.compile(r"\[TM\]\[(?P<level>TRACE|DEBUG|INFO|WARNING|WARN|ERROR|FATAL)\](?:\[[^\]\s]*\])* ?")
_TRTLLM_CPP = re.compile(r"\[TensorRT-LLM\]\[(?P<level>INFO|WARNING|ERROR|DEBUG|VERBOSE)\] ")
# glog "W0902 12:01:32.507000 819883 torch/utils/cpp_extension.py:2425] "
_GLOG = re.compile(
    r"(?P<level>[IWEF])(?P<mo>\d\d)(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)\.\d+\s+\d+ "
    r"[\w./\-]+:\d+\] "
)
# llama.cpp with --log-timestamps/--log-prefix: "0.00.035.060 I msg"
_LLAMACPP = re.compile(r"\d+\.\d\d\.\d{3}\.\d{3} (?P<level>[IWEDT]) ")

# What a log collector puts before the server's own prefix: docker compose's "service-1  | ", docker/kubectl
# --timestamps and CRI "2025-01-02T10:00:00.123456789Z stdout F ", journald/syslog "Jan 02 10:00:00 host
# unit[12]: ". They say nothing about the server; rules anchored at the message must see past them.
_COMPOSE = re.compile(r"[A-Za-z0-9][\w.\-]*\s+\| ?")
_ISO_WRAP = re.compile(
    r"(?P<Y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)T(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
    r"\s(?:(?:stdout|stderr) [FP] )?"
)
_SYSLOG = re.compile(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.\-]+ [\w.\-@/]+(?:\[\d+\])?: ")
# A launcher's own stamp and stream tag around the server's line: "[2024-12-05 01:56:09] [stderr] ", and an
# interactive prompt's ">>> " in pasted logs.
_STREAM_WRAP = re.compile(r"(?:\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] )?\[(?:stdout|stderr)\] |>>> ")
# kubectl logs --prefix "[pod/name/container] ", and a launcher's "2026-05-17 10:44:45.483 | " before each line.
_KUBECTL = re.compile(r"\[pod/[\w.\-]+/[\w.\-]+\] ")
_STAMP_BAR = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)? \| ")
# Docker Desktop's log view puts its own stamp before the server's bracketed one: "2025-02-04 21:21:33 [2025-…"
_BARE_STAMP = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?Z? (?=\[\d{4}-|\()")
# Go servers (Ollama, LocalAI). slog: 'time=2024-07-28T14:31:48.554-04:00 level=ERROR source=sched.go:443 msg="…" k=v';
# the standard log package: "2024/12/05 01:56:09 routes.go:1158: INFO …"; zerolog's console: " 6:36PM INF …".
_SLOG = re.compile(
    r"time=(?P<Y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)T(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)\S* "
    r"level=(?P<level>[A-Z]+)(?: source=\S+)? msg="
)
_GOLOG = re.compile(
    r"(?P<Y>\d{4})/(?P<mo>\d\d)/(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d) [\w.\-]+:\d+: "
    r"(?P<level>DEBUG|INFO|WARN|WARNING|ERROR) "
)
_ZEROLOG = re.compile(r" ?\d{1,2}:\d\d(?:AM|PM) (?P<level>DBG|INF|WRN|ERR|FTL|TRC) ")
_ZEROLOG_LEVELS = {"DBG": "DEBUG", "INF": "INFO", "WRN": "WARNING", "ERR": "ERROR", "FTL": "FATAL", "TRC": "DEBUG"}
# Any collector wrapper at all, in one match: most lines have none, and trying each pattern in turn for them
# cost more than the rest of the prefix parsing.
_ANY_WRAP = re.compile(
    "|".join(
        re.sub(r"\(\?P<\w+>", "(?:", p.pattern)
        for p in (_COMPOSE, _ISO_WRAP, _STREAM_WRAP, _KUBECTL, _STAMP_BAR, _BARE_STAMP, _SYSLOG)
    )
)
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


def _stamp(m: re.Match[str], year: int) -> float | None:
    g = m.groupdict()
    y = int(g["Y"]) if g.get("Y") else year
    return _epoch(y, int(g["mo"]), int(g["d"]), int(g["h"]), int(g["mi"]), int(g["s"]))


def _sglang_proc(ranks: str) -> str | None:
    # "DP21 TP21 EP21" -> "TP21": the TP rank identifies the scheduler process uniquely within a node.
    parts = ranks.split()
    if not parts:
        return None
    for p in parts:
        if p.startswith("TP"):
            return p
    return parts[-1]


def _peel_wrappers(text: str, year: int) -> tuple[int, float | None]:
    """Where the server's own text starts after collector prefixes, and the time a collector stamped."""
    pos, t = 0, None
    for _ in range(3):  # compose around timestamps, or the other way round
        if _ANY_WRAP.match(text, pos) is None:
            break
        m = _COMPOSE.match(text, pos)
        if m:
            pos = m.end()
            continue
        m = _ISO_WRAP.match(text, pos)
        # TGI's own prefix is an ISO stamp followed by a level; vLLM's starts with a level too
        if m and (not _TGI.match(text, pos) or _VLLM.match(text, m.end())):
            pos, t = m.end(), _stamp(m, year)
            continue
        m = (
            _STREAM_WRAP.match(text, pos)
            or _KUBECTL.match(text, pos)
            or _STAMP_BAR.match(text, pos)
            or _BARE_STAMP.match(text, pos)
        )
        if m:
            pos = m.end()
            continue
        m = _SYSLOG.match(text, pos)
        if m:
            mo = _MONTHS.get(text[pos : pos + 3])
            if mo:
                day, hh, mm, ss = (int(text[pos + a : pos + a + 2]) for a in (4, 7, 10, 13))
                t = _epoch(year, mo, day, hh, mm, ss)
            pos = m.end()
            continue
        break
    return pos, t


def parse_prefix(text: str, year: int) -> Prefix:
    """Peel collector wrappers, process tags and one logger prefix off `text`; `year` fills in yearless stamps
    (vLLM)."""
    pos, wrap_t = _peel_wrappers(text, year) if text[:1].isalnum() or text[:1] in "[>" else (0, None)
    if text[pos : pos + 1] == "{" and (record := read_record(text[pos:], year)) is not None:
        return Prefix(record.message, record.t or wrap_t, record.level, None, "json", None, record.more)
    p = _parse_from(text, pos, year)
    if p.fmt is None and pos == 0 and text[:1] in " \t":
        # A paste indented as a whole (a quote block): the prefix is there after the indentation. Only taken
        # when one is found, so that traceback frames keep theirs.
        lead = len(text) - len(text.lstrip(" \t"))
        if lead >= 4:
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
            return f.read(m, text, pos, year, proc, fmt)
    return Prefix(text[pos:], None, None, proc, fmt)


def _peel_process_tags(text: str, pos: int) -> tuple[int, str | None, str | None]:
    """Past the process tags (they nest and repeat): where the logger prefix starts, the process they name,
    and "vllm" when a vLLM-style tag was among them."""
    proc, fmt = None, None
    while True:
        m = _PROC_TAG.match(text, pos)
        if m:
            proc, fmt, pos = m.group("name").replace(" ", "_").replace("=", ""), "vllm", m.end()
            continue
        m = _TORCH_RANK.match(text, pos)
        if not m:
            return pos, proc, fmt
        proc, pos = proc or "rank" + m.group("rank"), m.end()


def _as_written(level: str | None) -> str | None:
    return level


def _llamacpp_level(level: str | None) -> str | None:
    return LEVELS.get(level or "", "INFO")  # its T (trace) has no name of its own


def _zerolog_level(level: str | None) -> str | None:
    return _ZEROLOG_LEVELS[level or ""]


def _no_proc(_m: re.Match[str]) -> str | None:
    return None


def _sglang_ranks(m: re.Match[str]) -> str | None:
    return _sglang_proc(m.group("ranks"))


def _trtllm_rank(m: re.Match[str]) -> str | None:
    return f"rank{m.group('rank')}" if m.group("rank") else None


@dataclass(frozen=True, slots=True)
class _Format:
    """One logger's prefix: its pattern (named groups Y/mo/d/h/mi/s for the time, `level`) and how to read it."""

    name: str
    pattern: re.Pattern[str]
    level: Callable[[str | None], str | None] = _as_written
    proc: Callable[[re.Match[str]], str | None] = _no_proc  # a rank the prefix names beats the process tag's
    keeps_tag: bool = False  # the prefix stays in the message, for rules that read it
    tag_names_format: bool = False  # a process tag before it names the format instead
    then: _Format | None = None  # a prefix that may follow this one and says the level

    def read(self, m: re.Match[str], text: str, pos: int, year: int, proc: str | None, fmt: str | None) -> Prefix:
        t = _stamp(m, year) if "mo" in self.pattern.groupindex else None  # a pattern with a date has a time
        name = (fmt or self.name) if self.tag_names_format else self.name
        level, rest = self.level(m.group("level")), m.end()
        if self.then is not None and (inner := self.then.pattern.match(text, rest)):
            # the inner prefix says the level; the line is still the outer logger's (SGLang's stamp on uvicorn's
            # lines is SGLang's evidence: a watcher that starts at them must not take uvicorn's readiness)
            level, rest = self.then.level(inner.group("level")), inner.end()
        return Prefix(text[pos:] if self.keeps_tag else text[rest:], t, level, self.proc(m) or proc, name, _ymd(m))


_UVICORN_FMT = _Format("uvicorn", _UVICORN)
_GO_FORMATS = (
    # msg stays quoted: failure texts must be the line's own text, and rules allow the quote ('^"?…').
    _Format("slog", _SLOG, level_name),
    _Format("golog", _GOLOG, level_name),
    _Format("zerolog", _ZEROLOG, _zerolog_level),
)
_LOGGER_LEVEL_FIRST = (
    _Format("vllm", _VLLM),
    _UVICORN_FMT,
    _Format("pylog", _PYLOG),
    _Format("glog", _GLOG, level_name),
)
# Tried in order, by the first character of the prefix; a character not here has no logger prefix.
_BY_FIRST: dict[str, tuple[_Format, ...]] = {
    "[": (
        # SGLang re-formats uvicorn's lines under its own stamp: "[ts] INFO:     "
        _Format("sglang", _SGLANG, proc=_sglang_ranks, tag_names_format=True, then=_UVICORN_FMT),
        _Format("trtllm", _TRTLLM, level_name, proc=_trtllm_rank),
        # LMDeploy's rules read the [TM] tag; its level is what matters here.
        _Format("turbomind", _TM, level_name, keeps_tag=True),
        _Format("trtllm", _TRTLLM_CPP, level_name),
    ),
    "t": _GO_FORMATS,
    " ": _GO_FORMATS,
    **dict.fromkeys("DIWEC", _LOGGER_LEVEL_FIRST),
    "T": (_Format("uvicorn", _UVICORN, level_name),),  # uvicorn's TRACE, read as DEBUG
}
_DIGIT_FIRST = (
    *_GO_FORMATS,
    _Format("tgi", _TGI, level_name),
    _Format("pylog", _PYFMT),
    _Format("llamacpp", _LLAMACPP, _llamacpp_level),
)


def _formats_at(first: str) -> tuple[_Format, ...]:
    # isdigit, not 0-9: \d in the patterns matches any script's digits too.
    return _DIGIT_FIRST if first.isdigit() else _BY_FIRST.get(first, ())


def _ymd(m: re.Match[str]) -> tuple[int, int, int] | None:
    g = m.groupdict()
    if g.get("Y"):
        return int(g["Y"]), int(g["mo"]), int(g["d"])
    return None
