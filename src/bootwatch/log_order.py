"""A log whose newest line comes first: what log viewers export (Google Cloud Logging, `journalctl -r`, a
console's table sorted newest first). Read top down it tells its story backwards (a traceback's exception before
its frames, the death before the launch), so `report` reads it from its last line up, numbering lines as the file
does."""

from __future__ import annotations

from typing import Any

from bootwatch.lines import Normalizer
from bootwatch.sources.encoding import decode_line

MAX_BYTES = 16 << 20  # a viewer's export is pasted or downloaded: beyond this, the file is read as written
HEAD = 64 << 10  # what is looked at: the first lines' stamps
_LINES = 400
_MIN_FALLS = 3


def newest_first(data: bytes, year: int | None) -> bool:
    """The stamps of the first lines fall far more often than they rise."""
    normalizer = Normalizer(year)
    falls = rises = 0
    last: float | None = None
    for no, raw in enumerate(data.split(b"\n")[:_LINES], 1):
        for line in normalizer.lines(no, decode_line(raw)):
            t = line.t
            if t is None:
                continue
            if last is not None:
                falls += t < last
                rises += t > last
            last = t
    return falls >= _MIN_FALLS and falls > 4 * rises


def oldest_first(data: bytes) -> list[bytes]:
    """The file's lines from its last up."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line + b"\n" for line in reversed(lines)]


_NUMBERS = frozenset({"line_no", "start_line", "end_line", "launch_start_line", "last_line_no"})


def file_numbers(summary: dict[str, Any], total: int) -> dict[str, Any]:
    """The summary of the lines read oldest first, its line numbers turned into the file's (line n read is line
    total + 1 - n of the file): what a user finds in the file is where the report points."""
    return {k: _renumbered(k, v, total) for k, v in summary.items()}


def _renumbered(key: str, value: Any, total: int) -> Any:
    if key in _NUMBERS and isinstance(value, int) and 0 < value <= total:
        return total + 1 - value
    if isinstance(value, dict):
        return file_numbers(value, total)
    if isinstance(value, list):
        return [_renumbered("", v, total) for v in value]
    return value


__all__ = ["HEAD", "MAX_BYTES", "file_numbers", "newest_first", "oldest_first"]
