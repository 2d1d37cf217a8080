"""The pipeline, offline or live: chunks of bytes -> prefilter -> lines -> tracker -> events.

The same `Analyzer` serves `report` (a file read to its end), `replay` and the live commands, so every
test on a recorded log exercises the live path too.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO

import re2

from bootwatch import log_order
from bootwatch.engines import RuleBook, load_rulebook
from bootwatch.engines.prefilter import Prefilter, for_union
from bootwatch.errors import UsageError
from bootwatch.lines import Normalizer
from bootwatch.lines.ansi import strip_ansi_bytes
from bootwatch.serving import ServingTracker
from bootwatch.sources.chunks import READ_SIZE, LineChunker, newlines_before, pieces
from bootwatch.sources.encoding import Utf8Reader, decode_line, drop_nuls, legacy_text, sniff
from bootwatch.sources.file import check_path, launch_starts
from bootwatch.sources.interrupts import stop_requested
from bootwatch.tracker import Event, Tracker
from bootwatch.tracker.summary import LiveFacts, Summary
from bootwatch.tracker.verdict import Decision

_book_cache: dict[tuple[str, ...], tuple[RuleBook, Prefilter]] = {}


def rules_for(extra: Iterable[os.PathLike[str] | str] = ()) -> tuple[RuleBook, Prefilter]:
    key = tuple(str(p) for p in extra)
    if key not in _book_cache:
        book = load_rulebook([Path(p) for p in key])
        _book_cache[key] = (book, Prefilter(book))
    return _book_cache[key]


_skim_cache: dict[tuple[str, ...], Prefilter] = {}


def skim_prefilter_for(extra: Iterable[os.PathLike[str] | str] = ()) -> Prefilter:
    """What a skim of a ready launch's serving stretch looks for: every rule but the serving numbers (`stats`) and
    those that act only while a launch starts (phases, progress, readiness: a ready launch is past them)."""
    key = tuple(str(p) for p in extra)
    if key not in _skim_cache:
        book, _ = rules_for(extra)
        _skim_cache[key] = Prefilter(book, skip_kinds=frozenset({"stats", "phase", "progress", "ready"}))
    return _skim_cache[key]


def launch_marker(extra: Iterable[os.PathLike[str] | str] = ()) -> Any:
    """One RE2 pattern (bytes) for every engine's launch lines: where a new launch may begin. A `first_only` line
    (an Ollama model load) begins one only when no launch of its engine is under way, which a scan backwards
    cannot know: the window that starts there would take a later load for the launch a full read calls serving."""
    book, _ = rules_for(extra)
    parts = [for_union(r.regex.pattern) for _, r in book.launch if not r.first_only]
    return re2.compile("|".join(f"(?:{p})" for p in parts).encode())


def count_lines(path: os.PathLike[str] | str, end: int) -> int:
    """Newlines in the first `end` bytes of the file."""
    with open(path, "rb") as f:
        return newlines_before(f.fileno(), end)


def looks_binary(head: bytes) -> bool:
    """A log is text: many control bytes, or bytes that are neither UTF-8 nor a legacy text encoding (GBK,
    Latin-1), mean someone pointed us at something else. A byte-order mark announces UTF-16/32 text; NUL runs
    (copytruncate's) are skipped before judging."""
    if not head:
        return False
    if sniff(head) is not None:
        return False
    sample = drop_nuls(head[:65536])  # NUL runs are what copytruncate leaves: look at the bytes after them
    if not sample:
        return False
    ctrl = sum(1 for b in sample if b < 32 and b not in (9, 10, 13, 27)) + sample.count(b"\x7f")
    if ctrl > len(sample) // 10:
        return True
    if sample.decode("utf-8", "replace").count("\ufffd") <= len(sample) // 20:
        return False
    return not legacy_text(sample)


_NUL_RUN = re.compile(rb"\x00{8,}")  # a break between writers, not a stray byte


class Analyzer:
    """Feed it chunks of complete lines; it keeps line numbers and hands lines to the tracker."""

    def __init__(
        self,
        engine: str | None = None,
        rules: Iterable[os.PathLike[str] | str] = (),
        year: int | None = None,
        clock: str = "log",
        tracker: Tracker | None = None,
    ) -> None:
        book, self.prefilter = rules_for(rules)
        self._rules = tuple(rules)
        if engine is not None and engine not in book.engines:
            # The engines are the rule files loaded, the user's included: --engine takes any of them.
            raise UsageError(f"unknown engine {engine!r}: the rule files know {', '.join(sorted(book.engines))}")
        self.tracker = tracker or Tracker(book, ServingTracker(), engine=engine)
        self.normalizer = Normalizer(year)
        self.next_no = 1  # number of the next physical line
        self.clock = clock  # "log": times from the log's prefixes; "arrival": the time passed to feed
        self.lines_seen = 0
        self.bytes_seen = 0
        # On the arrival clock, the log's own: its latest timestamp, and the one at the ready line (or the
        # last one before it). A watch that arrives after readiness says since when from these.
        self.log_t: float | None = None
        self.ready_log_t: float | None = None
        self._ready: object = None  # the launch's ready record ready_log_t belongs to
        # While `bytes_seen` is below this, a ready launch's serving lines are skimmed: a watch that attaches to a
        # server that has served for a day reads its startup and its latest serving lines, and the stretch
        # between only for what every other rule says (a traceback, a death, a new launch), at C speed.
        self.skim_until = 0
        self.skimmed_from: int | None = None  # the first line of the skimmed stretch
        self.skimmed_to: int | None = None  # the last one

    def skip_to(self, no: int) -> None:
        """The lines up to `no` were looked at another way (a backward pass's hits): the next one fed is `no`."""
        self.lines_seen += max(0, no - self.next_no)
        self.next_no = no

    def serving(self) -> bool:
        """The current launch is ready and has not failed: what follows is its serving stretch."""
        launch = self.tracker.launch
        return launch is not None and launch.ready is not None and launch.failure is None

    def skimming(self) -> bool:
        return self.bytes_seen < self.skim_until and self.serving()

    def feed(self, data: bytes, now: float | None = None) -> list[Event]:
        """`data` holds complete lines (each ends with \\n), or the \\r-ended updates of the line still being written
        (no \\n at all: see `_feed_updates`)."""
        if not data:
            return []
        if not data.endswith(b"\n"):
            return self._feed_updates(data, now)
        skim = self.skimming()
        self.bytes_seen += len(data)
        if b"\x00" in data:
            self._note_nul_runs(data)
        data = strip_ansi_bytes(drop_nuls(data))
        tracker = self.tracker
        if skim and self.skimmed_from is None:
            self.skimmed_from = self.next_no
        starts = (skim_prefilter_for(self._rules) if skim else self.prefilter).line_starts(data)
        events: list[Event] = []
        count, find = data.count, data.find
        pos, no, i, n = 0, self.next_no, 0, len(data)
        while pos < n:
            if not tracker.wants_all_lines:
                while i < len(starts) and starts[i] < pos:
                    i += 1
                if i == len(starts):
                    break
                target = starts[i]
                no += count(b"\n", pos, target)
                pos = target
            end = find(b"\n", pos)
            if end < 0:
                end = n
            events += self._line(no, data[pos:end], now)
            pos, no = end + 1, no + 1
        no += count(b"\n", pos) if pos < n else 0
        self.lines_seen += no - self.next_no
        self.next_no = no
        if skim:
            self.skimmed_to = no - 1
        self._note_tail(data, no)
        self._note_last(data, no - 1, now)
        return events

    def _feed_updates(self, data: bytes, now: float | None) -> list[Event]:
        """A progress bar's \\r redraws that arrived before its line ends: analysed now, on their arrival clock, as
        part of line `next_no`; the rest of that line comes later with its newline and keeps the number."""
        self.bytes_seen += len(data)
        data = strip_ansi_bytes(drop_nuls(data))
        if not self.tracker.wants_all_lines and not self.prefilter.line_starts(data + b"\n"):
            return []
        return self._line(self.next_no, data, now)

    def _note_nul_runs(self, data: bytes) -> None:
        """A run of NUL bytes is where a log was truncated under a writer, or where another process's appends begin
        (two servers writing one file): what follows it is another launch."""
        for m in _NUL_RUN.finditer(data):
            self.tracker.split_before(self.next_no + data.count(b"\n", 0, m.end()))

    def _line(self, no: int, raw: bytes, now: float | None) -> list[Event]:
        text = decode_line(raw)
        out: list[Event] = []
        for line in self.normalizer.lines(no, text):
            line.log_t = line.t
            if self.clock == "arrival":
                if line.t is not None:
                    self.log_t = line.t
                line.t = now
            out += self.tracker.feed(line)
            launch = self.tracker.launch
            if launch is not None and launch.ready is not None and launch.ready is not self._ready:
                self._ready, self.ready_log_t = launch.ready, self.log_t
        return out

    def _note_tail(self, data: bytes, next_no: int) -> None:
        """The last non-blank line of the chunk: what the server said last, if it dies unexplained."""
        trimmed = data.rstrip()
        if not trimmed:
            return
        start = trimmed.rfind(b"\n") + 1
        # `next_no` is the number of the line after the chunk's last newline; count back over the ones after it.
        no = next_no - data.count(b"\n", start)
        lines = self.normalizer.lines(no, decode_line(trimmed[start:][-4096:]))
        self.tracker.tail = (no, lines[-1].text.strip()) if lines else None

    def _note_last(self, data: bytes, last_no: int, now: float | None) -> None:
        """The log's clock at the end of the chunk, for the duration of the phase still running."""
        launch = self.tracker.launch
        if launch is None:
            return
        start = data.rfind(b"\n", 0, len(data) - 1) + 1
        for line in self.normalizer.lines(last_no, decode_line(data[start:])):
            if line.t is not None:
                launch.last_log_t = line.t
        # The decision clock: the log's own, or for a live analyzer the chunk's arrival.
        launch.last_t = now if self.clock == "arrival" else launch.last_log_t
        launch.last_no = max(launch.last_no, last_no)

    def finish(self) -> list[Event]:
        return self.tracker.finish()

    def mark_caught_up(self) -> None:
        """What was fed so far was the past, read at once: its arrival times are not how long it took."""
        launch = self.tracker.launch
        if launch is not None:
            launch.caught_up = True
            for p in launch.phases:
                p.caught_up = True

    def summary(self, decision: Decision | None = None, live: LiveFacts | None = None) -> Summary:
        s = self.tracker.summary(decision, live, lines=self.lines_seen)
        start = s.details.get("launch_start_line")
        # only a skim of this launch's serving stretch, not of an earlier launch's
        skimmed, last = self.skimmed_from, self.skimmed_to
        if skimmed is not None and last is not None and isinstance(start, int) and last >= start:
            s.details["serving_skimmed_lines"] = [max(skimmed, start), last]
        return s


CATCH_UP_PIECE = 64 << 10  # a stop signal is looked at this often while a file is read to its end


def analyze_file(
    f: BinaryIO,
    analyzer: Analyzer,
    name: str,
    complete_only: bool = False,  # noqa: ANN001 - binary file
    clock: Callable[[], float] | None = None,
    until: Callable[[], bool] | None = None,
) -> tuple[int, int]:
    """Feed the rest of `f` to `analyzer`; returns (bytes of the file read, over-long lines cut).

    `complete_only` leaves a partial last line unread (a live file may still be writing it): the bytes read end
    where it begins, which is where a follower resumes. They are the file's bytes, not the ones fed: an
    over-long line is fed cut, a UTF-16 file as UTF-8. `clock` gives the arrival time of each chunk for a live
    analyzer. `until` is asked after each piece: True stops the read there (the bytes read then do not say where;
    `analyzer.next_no` says which line comes next).
    """
    try:
        begin: int | None = f.tell()
    except (OSError, ValueError):  # a FIFO or standard input: read as a stream
        begin = None
    chunker = LineChunker()
    fed = 0
    first = True
    reader = Utf8Reader(f)
    while True:
        if stop_requested() is not None:  # Ctrl-C or SIGTERM while catching up: the summary covers what was read
            return fed, chunker.truncated_lines
        block = reader.read(READ_SIZE)
        if not block:
            break
        if first:
            first = False
            if looks_binary(block):
                raise UsageError(f"{name}: this looks like binary data, not a server log")
        for piece in pieces(chunker.push(block), CATCH_UP_PIECE):
            if stop_requested() is not None:
                return fed, chunker.truncated_lines
            fed += len(piece)
            analyzer.feed(piece, clock() if clock else None)
            if until is not None and until():  # the caller reads on its own way from the next line
                return fed, chunker.truncated_lines
    if not complete_only:
        tail = chunker.flush()
        fed += len(tail)
        analyzer.feed(tail, clock() if clock else None)
        return fed, chunker.truncated_lines
    if begin is not None:
        held, size = chunker.held()
        return f.tell() - begin - reader.source_size(held, size), chunker.truncated_lines
    return fed, chunker.truncated_lines


def open_log(path: os.PathLike[str] | str) -> BinaryIO:
    """A log to read once to its end: a regular file, a /proc file or a FIFO (read as a stream, to its
    writer's close); a device is refused before it is opened."""
    if str(path) == "-":  # standard input, read as a stream to its end (`report - < server.log`, a pipe)
        return open(0, "rb", closefd=False)
    p = Path(path)
    if check_path(p, follow=False) is None:
        raise UsageError(f"{p}: no such file")
    try:
        return p.open("rb")
    except OSError as e:
        raise UsageError(f"{p}: cannot open: {e.strerror}") from None


def year_of(path: os.PathLike[str] | str) -> int | None:
    import time

    try:
        return time.gmtime((os.fstat(0) if str(path) == "-" else os.stat(path)).st_mtime).tm_year
    except OSError:
        return None


# Where a report starts reading: this many launch markers before the end. A launch prints at most two
# (vLLM's banner and its engine line); the tracker itself decides which marker starts the last launch.
MARKERS_BACK = 4


def _newest_first(f: BinaryIO, path: os.PathLike[str] | str, analyzer: Analyzer) -> dict[str, Any] | None:
    """A regular file whose newest line comes first, read from its last line up (log_order.py); else None, with
    `f` back at its start (a FIFO or standard input is not looked at: it is read once, as it comes)."""
    st = os.fstat(f.fileno())
    if not stat.S_ISREG(st.st_mode) or st.st_size > log_order.MAX_BYTES:
        return None
    try:
        head = f.read(log_order.HEAD)
        if looks_binary(head[:4096]) or not log_order.newest_first(head, analyzer.normalizer.year):
            f.seek(0)
            return None
        data = head + f.read()
    except OSError as e:
        raise UsageError(f"{path}: read failed: {e.strerror or e}") from None
    lines = log_order.oldest_first(data)
    analyzer.feed(b"".join(lines))
    analyzer.finish()
    s = analyzer.summary()
    s.details["newest_first"] = True
    return log_order.file_numbers(s.to_json(), len(lines))


def analyze_path(
    path: os.PathLike[str] | str,
    engine: str | None = None,
    rules: Iterable[os.PathLike[str] | str] = (),
    exhaustive: bool = False,
) -> dict[str, Any]:
    """`report` in one call: the summary of the last launch in the file.

    The summary speaks of the last launch only, so unless `exhaustive`, reading starts a few launch markers
    before the end (found by scanning backwards): a log appended by a thousand launches costs one.
    """
    analyzer = Analyzer(engine=engine, rules=rules, year=year_of(path))
    with open_log(path) as f:
        reversed_log = _newest_first(f, path, analyzer)
        if reversed_log is not None:
            return reversed_log
        start = 0
        # A FIFO (or standard input) is read once, from its start: there is no going back to a name.
        if not exhaustive and str(path) != "-" and stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            try:
                starts = launch_starts(path, launch_marker(rules), keep=MARKERS_BACK)
            except OSError:
                starts = []
            if len(starts) == MARKERS_BACK and starts[0] > 0:
                start = starts[0]
                analyzer.next_no = count_lines(path, start) + 1
                f.seek(start)
        try:
            _, truncated = analyze_file(f, analyzer, str(path))
        except OSError as e:
            raise UsageError(f"{path}: read failed: {e.strerror or e}") from None
    analyzer.finish()
    s = analyzer.summary()
    s.details["truncated_lines"] = truncated
    if start:
        s.details["skipped_bytes"] = start  # earlier launches, not read
    return s.to_json()
