"""Durations: DUR arguments (`90s`, `15m`, `1h` or plain seconds) in, short readable durations out."""

from __future__ import annotations

import re

from bootwatch.errors import UsageError

_DUR = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT = {None: 1.0, "s": 1.0, "ms": 0.001, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    m = _DUR.match(text)
    if not m:
        raise UsageError(f"bad duration {text!r}: use 90s, 15m, 1h or plain seconds")
    return float(m.group(1)) * _UNIT[m.group(2)]


def positive_seconds(seconds: float, what: str) -> float:
    """`seconds`, if it is a wait that means something: 0, a negative number and NaN are refused (one check
    for the command line's --timeout/--stall and the API's timeout=/stall=; a 0 must never read as "never")."""
    if not seconds > 0:
        raise UsageError(f"{what} {seconds:g}: must be more than 0 seconds")
    return seconds


def fmt_duration(s: float | None) -> str:
    """`5 ms`, `4.2 s`, `3m07s`, `1h05m`; `-` when unknown. Under a second in milliseconds: a 5 ms completion
    is not "0.0 s"."""
    if s is None:
        return "-"
    if s < 0.9995:
        return f"{max(0.0, s) * 1000:.0f} ms"
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"
