"""DUR arguments: `90s`, `15m`, `1h` or plain seconds."""

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
