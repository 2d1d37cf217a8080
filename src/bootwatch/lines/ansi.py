"""ANSI escape removal; servers colour their prefixes even when writing to a file."""

import re

# CSI sequences (colours, cursor moves), OSC sequences (titles, hyperlinks) and two-byte escapes; and a colour
# sequence whose ESC a Windows console without VT processing drew as "←" (code page 437's glyph for 0x1b) and a
# user copied as text: "←[32mINFO←[0m:".
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|←\[[0-9;]*m")
_ANSI_BYTES = re.compile(_ANSI.pattern.encode())
_DRAWN_ESC = "←["
_DRAWN_ESC_BYTES = _DRAWN_ESC.encode()


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text) if "\x1b" in text or _DRAWN_ESC in text else text


def strip_ansi_bytes(data: bytes) -> bytes:
    return _ANSI_BYTES.sub(b"", data) if b"\x1b" in data or _DRAWN_ESC_BYTES in data else data
