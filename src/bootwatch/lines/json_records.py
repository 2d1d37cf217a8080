"""Structured log records: one JSON object a line, the message in a field.

Containers on Kubernetes often log through a JSON formatter: NVIDIA NIM and python-json-logger write
`{"level": "INFO", "time": "02-20 21:47:39.338", "message": "...", "exc_info": "Traceback ..."}`, Google
Cloud's agents `{"severity": ..., "message": ...}`, TGI's `--json-output` `{"timestamp": ..., "level": ...,
"fields": {"message": ...}}`. Rules are written against the message, so the record is read here into the
same time/level/message a text prefix gives. llama.cpp's own server JSON (2023-2024, also relayed by Ollama's
runner) is left as it is: its records name the C++ `function`, and llama.cpp's rules read them whole.
"""

from __future__ import annotations

import calendar
import json
import re
from dataclasses import dataclass
from datetime import datetime

from bootwatch.lines.ansi import strip_ansi
from bootwatch.lines.levels import level_name

_LEVEL_KEYS = ("level", "levelname", "severity")
_TIME_KEYS = ("time", "timestamp", "asctime")
# vLLM's yearless "02-20 21:47:39.338" inside NIM's records
_YEARLESS = re.compile(r"(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")


@dataclass(slots=True)
class Record:
    message: str  # its first line: what the rules read
    t: float | None
    level: str | None
    more: tuple[str, ...]  # an exception's traceback lines, as the text formatter would have printed them


def read_record(text: str, year: int) -> Record | None:
    """The record `text` holds, or None when it is not one (most lines: the first check is one character)."""
    if not text.startswith("{") or not text.rstrip().endswith("}"):
        return None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):  # bytes from a log: a record nested too deep is not one
        return None
    if not isinstance(obj, dict) or "function" in obj:
        return None
    fields = obj.get("fields")
    message = obj.get("message")
    if message is None and isinstance(fields, dict):
        message = fields.get("message")
    if not isinstance(message, str):
        return None
    # JSON escapes can carry what a text log would hold raw: colour codes go, as they do from text lines
    first, _, rest = strip_ansi(message).partition("\n")
    more = _traceback(obj.get("exc_info")) or _traceback(rest)
    return Record(first, _time(obj, year), _level(obj), more)


def _level(obj: dict[str, object]) -> str | None:
    for key in _LEVEL_KEYS:
        value = obj.get(key)
        if isinstance(value, str) and value:
            return level_name(value.upper())
    return None


def _time(obj: dict[str, object], year: int) -> float | None:
    for key in _TIME_KEYS:
        value = obj.get(key)
        if not isinstance(value, str):
            continue
        try:
            stamp = datetime.fromisoformat(value.replace(",", "."))
        except ValueError:
            m = _YEARLESS.match(value)
            if m is None:
                continue
            mo, d, h, mi, s = (int(x) for x in m.groups())
            try:
                return float(calendar.timegm((year, mo, d, h, mi, s, 0, 0, 0)))
            except (ValueError, OverflowError):
                return None
        if stamp.tzinfo is None:
            return float(calendar.timegm(stamp.timetuple()))  # a stamp with no zone is read as UTC, as elsewhere
        return stamp.timestamp()
    return None


def _traceback(value: object) -> tuple[str, ...]:
    """The lines of an exception the record carries ("None" when there is none, in NIM's records)."""
    if not isinstance(value, str) or "Traceback (most recent call last)" not in value:
        return ()
    return tuple(line for line in value.splitlines() if line.strip())
