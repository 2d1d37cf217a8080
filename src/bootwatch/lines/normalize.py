"""Physical log lines in, `Line`s out: ANSI stripped, \\r updates split, glued messages separated."""

from __future__ import annotations

import re
import time

from bootwatch.lines.ansi import strip_ansi
from bootwatch.lines.line import Line
from bootwatch.lines.prefixes import TABLE, parse_prefix

# A tqdm bar that had no newline before the next log record: "…0/1 [00:00<?, ?it/s][2026-05-25 17:26:25 TP1] …".
# Only its end is used, so the digits before the "/" are checked by a lookbehind: a pattern that starts with
# a literal is searched for that literal first (the leading \d+ made `re` try every position: ~6 µs a line).
# Or hf-hub's indicatif bar (Rust: mistral.rs, TEI) whose last state ends "… 596 B/596 B 3.50 KiB/s (0s)": whatever
# follows its ETA on the line was printed after it (the error that ended the download).
_BAR_END = re.compile(r"/(?:(?<=\d/)\d+ \[(?:\d|\?)[^\[\]]*\]|(?P<rate>(?<=B/)s \((?:\d+[smhd])+\))(?=\S))")
# Where a new record can start after a bar: a prefix formats.toml marks `glued` (SGLang's stamp, vLLM's process
# tag or logger prefix, Python logging's, an ISO stamp).
_RECORD_START = TABLE.glued


def split_glued(segment: str) -> list[str]:
    """Split records that a progress bar without a trailing newline glued together."""
    out: list[str] = []
    while True:
        bar = _BAR_END.search(segment)
        if not bar:
            break
        if bar.group("rate") is None and not _RECORD_START.match(segment, bar.end()):
            break
        out.append(segment[: bar.end()])
        segment = segment[bar.end() :]
    out.append(segment)
    return out


def segments(text: str) -> list[tuple[str, bool]]:
    """ANSI-free segments of one physical line, each flagged True when a later \\r update supersedes it."""
    text = strip_ansi(text)
    if "\r" not in text and ("/" not in text or _BAR_END.search(text) is None):
        return [(text, False)]  # most lines: one segment, nothing glued
    parts = [text] if "\r" not in text else [p for p in text.split("\r") if p.strip()] or [""]
    out: list[tuple[str, bool]] = []
    last = len(parts) - 1
    for i, part in enumerate(parts):
        glued = split_glued(part) if "/" in part else [part]
        for j, g in enumerate(glued):
            out.append((g, i < last and j == len(glued) - 1))
    return out


class Normalizer:
    """Turns physical lines into `Line`s; remembers the year so vLLM's yearless stamps get one."""

    def __init__(self, year: int | None = None) -> None:
        self.year = year or time.gmtime().tm_year

    def lines(self, no: int, text: str) -> list[Line]:
        out = []
        for seg, update in segments(text):
            p = parse_prefix(seg, self.year)
            if p.ymd:
                self.year = p.ymd[0]
            out.append(Line(no, p.text, seg, p.t, p.level, p.proc, p.fmt, update, target=p.target))
            out += [Line(no, more, more, p.t, p.level, p.proc, p.fmt, update) for more in p.more]
        return out
