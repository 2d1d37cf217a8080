"""ANSI escape removal; servers colour their prefixes even when writing to a file."""

import re

# CSI sequences (colours, cursor moves), OSC sequences (titles, hyperlinks) and two-byte escapes.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_ANSI_BYTES = re.compile(_ANSI.pattern.encode())


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text) if "\x1b" in text else text


def strip_ansi_bytes(data: bytes) -> bytes:
    return _ANSI_BYTES.sub(b"", data) if b"\x1b" in data else data
