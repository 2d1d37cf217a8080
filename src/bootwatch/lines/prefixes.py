"""Log prefixes of the servers bootwatch knows, parsed once here and nowhere else.

Each parser takes the ANSI-free text of one segment and returns what the prefix says (time, level,
process/rank) and the message after it. Process tags nest: vLLM puts `(EngineCore_DP0 pid=7)` before its
logger prefix, Ray puts `(Actor pid=1, ip=..)` before SGLang's `[time TP0]`, torch puts `[rank1]:` before a
traceback line; so tags are peeled off first and then one logger format is matched.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass

_LEVELS = {
    "I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL", "D": "DEBUG", "V": "DEBUG",
    "WARN": "WARNING", "TRACE": "DEBUG", "CRITICAL": "CRITICAL", "FATAL": "FATAL",
}

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
_TRTLLM_CPP = re.compile(r"\[TensorRT-LLM\]\[(?P<level>INFO|WARNING|ERROR|DEBUG|VERBOSE)\] ")
# glog "W0902 12:01:32.507000 819883 torch/utils/cpp_extension.py:2425] "
_GLOG = re.compile(r"(?P<level>[IWEF])(?P<mo>\d\d)(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)\.\d+\s+\d+ "
                   r"[\w./\-]+:\d+\] ")
# llama.cpp with --log-timestamps/--log-prefix: "0.00.035.060 I msg"
_LLAMACPP = re.compile(r"\d+\.\d\d\.\d{3}\.\d{3} (?P<level>[IWEDT]) ")


@dataclass(slots=True)
class Prefix:
    text: str
    t: float | None = None
    level: str | None = None
    proc: str | None = None
    fmt: str | None = None
    ymd: tuple[int, int, int] | None = None  # to tell yearless vLLM stamps which year they are in


def _epoch(y: int, mo: int, d: int, h: int, mi: int, s: int) -> float | None:
    try:
        return float(calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)))
    except (ValueError, OverflowError):
        return None


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


def parse_prefix(text: str, year: int) -> Prefix:
    """Peel process tags and one logger prefix off `text`; `year` fills in yearless stamps (vLLM)."""
    proc = None
    fmt = None
    pos = 0
    # Process tags (possibly repeated) come first.
    while True:
        m = _PROC_TAG.match(text, pos)
        if m:
            proc = m.group("name").replace(" ", "_").replace("=", "")
            fmt = "vllm"
            pos = m.end()
            continue
        m = _TORCH_RANK.match(text, pos)
        if m:
            proc = proc or "rank" + m.group("rank")
            pos = m.end()
            continue
        break

    c = text[pos : pos + 1]
    m = None
    if c == "[":
        m = _SGLANG.match(text, pos)
        if m:
            t = _stamp(m, year)
            proc = _sglang_proc(m.group("ranks")) or proc
            level = m.group("level")
            rest = m.end()
            u = _UVICORN.match(text, rest)
            if u:
                level, rest = u.group("level"), u.end()
                return Prefix(text[rest:], t, level, proc, "uvicorn", _ymd(m))
            return Prefix(text[rest:], t, level, proc, fmt or "sglang", _ymd(m))
        m = _TRTLLM.match(text, pos)
        if m:
            rank = m.group("rank")
            return Prefix(text[m.end():], _stamp(m, year), _LEVELS[m.group("level")],
                          f"rank{rank}" if rank else proc, "trtllm", _ymd(m))
        m = _TRTLLM_CPP.match(text, pos)
        if m:
            return Prefix(text[m.end():], None, _LEVELS.get(m.group("level"), m.group("level")), proc, "trtllm")
    elif c.isdigit():
        m = _TGI.match(text, pos)
        if m:
            return Prefix(text[m.end():], _stamp(m, year), _LEVELS.get(m.group("level"), m.group("level")),
                          proc, "tgi", _ymd(m))
        m = _PYFMT.match(text, pos)
        if m:
            return Prefix(text[m.end():], _stamp(m, year), m.group("level"), proc, "pylog", _ymd(m))
        m = _LLAMACPP.match(text, pos)
        if m:
            return Prefix(text[m.end():], None, _LEVELS.get(m.group("level"), "INFO"), proc, "llamacpp")
    elif c in "DIWEC":
        m = _VLLM.match(text, pos)
        if m:
            return Prefix(text[m.end():], _stamp(m, year), m.group("level"), proc, "vllm")
        m = _UVICORN.match(text, pos)
        if m:
            return Prefix(text[m.end():], None, m.group("level"), proc, "uvicorn")
        m = _PYLOG.match(text, pos)
        if m:
            return Prefix(text[m.end():], None, m.group("level"), proc, "pylog")
        m = _GLOG.match(text, pos)
        if m:
            return Prefix(text[m.end():], _stamp(m, year), _LEVELS[m.group("level")], proc, "glog")
    elif c == "T":
        m = _UVICORN.match(text, pos)
        if m:
            return Prefix(text[m.end():], None, "DEBUG", proc, "uvicorn")
    return Prefix(text[pos:], None, None, proc, fmt)


def _ymd(m: re.Match[str]) -> tuple[int, int, int] | None:
    g = m.groupdict()
    if g.get("Y"):
        return int(g["Y"]), int(g["mo"]), int(g["d"])
    return None
