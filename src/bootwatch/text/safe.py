"""Text from a log, made inert for a terminal: every control character is shown as an escape.

A log is data. Its bytes may hold ESC sequences (a terminal reset, a charset switch, an OSC 52
clipboard write), 8-bit C1 controls that some terminals obey like ESC, BEL, backspace or a
carriage return that overwrites what was printed. `printable` turns each of those into visible
text (`\\x1b`, `\\x9d`, `\\x07`) so that what reaches the screen is exactly what the log said and
nothing the log can make the terminal do. Bidirectional overrides are escaped too: they reorder
what a person reads. Tab is kept.
"""

from __future__ import annotations

import re

# C0 (but tab), DEL, C1, and the bidi embedding/override/isolate marks.
_ESCAPED = (
    [c for c in range(0x20) if c != 0x09]
    + list(range(0x7F, 0xA0))
    + [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
)
_TABLE = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _ESCAPED}
# Lone surrogates (undecodable bytes kept by surrogateescape) cannot be written as UTF-8 at all.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogate(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    return f"\\x{c - 0xDC00:02x}" if 0xDC80 <= c <= 0xDCFF else f"\\u{c:04x}"


def printable(s: str) -> str:
    """`s` with every control character (but tab) shown as a visible escape."""
    s = s.translate(_TABLE)
    if _SURROGATE.search(s):
        s = _SURROGATE.sub(_surrogate, s)
    return s


__all__ = ["printable"]
