"""Opening a SOURCE for a watch: the scheme's own opener (sources/registry.py), or, for a local file, the
catch-up on what it already holds through the Analyzer. That catch-up is why this sits above pipeline and the
sinks while the followers themselves sit below them."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from bootwatch.errors import UsageError
from bootwatch.pipeline import Analyzer, analyze_file, count_lines, launch_marker, skim_prefilter_for
from bootwatch.sinks.protocol import Sink
from bootwatch.sources.chunks import KEEP, MAX_LINE
from bootwatch.sources.file import BackScan, FileFollower, Kind, check_path, last_launch_offset, scan_back
from bootwatch.sources.interrupts import caught_while_busy, stop_requested
from bootwatch.sources.protocol import Source
from bootwatch.sources.registry import opener
from bootwatch.sources.spec import Spec

# A catch-up reads the latest serving lines of a ready launch in full (the live view's first numbers); the
# stretch between its ready line and these is skimmed (Analyzer.skim_until).
SERVING_TAIL = 64 << 10


@dataclass
class Opening:
    """What an opener may use: the analyzer (a file catches up on what it already holds), the sink (notes,
    the events of the launch so far), and the watch's options. `await_new` is the opener's to set: the file's
    last launch had already ended, so only a new one is judged. The schemes' openers see it as
    `sources.protocol.OpenOptions`."""

    analyzer: Analyzer
    sink: Sink
    from_start: bool = False
    rules: tuple[str, ...] = ()
    attach_ready: bool = False  # a last launch already ready is the server as it stands, not one already over
    await_new: bool = field(default=False)

    def note(self, text: str) -> None:
        self.sink.note(time.time(), text)


def open_source(spec: Spec, opening: Opening) -> Source:
    if spec.kind == "file":
        return open_file(spec, opening)
    return opener(spec)(spec, opening)


def catch_up(path: Path, analyzer: Analyzer, start: int, scan: BackScan | None = None, tail: int = SERVING_TAIL) -> int:
    """Read what the file already holds (from `start`) up to its last complete line; returns where it ended.
    Its events are not kept (a 1 GB history would hold a million); `Tracker.snapshot` says where it stands.
    With `scan` (the backward pass that found `start`), a ready launch's serving stretch is not read again: the
    lines the pass hit are read one by one, then the latest `tail` bytes of serving lines in full."""
    if start:
        # Line numbers count from the top of the file, skipped launches included (what `report` says too).
        analyzer.next_no = count_lines(path, start) + 1
    if scan is not None and scan.start == start:
        end = _catch_up_by_hits(path, analyzer, scan, tail)
    else:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            analyzer.skim_until = analyzer.bytes_seen + max(0, size - start - tail)
            f.seek(start)
            fed, _ = analyze_file(f, analyzer, str(path), complete_only=True, clock=time.time)
        end = start + fed
    analyzer.skim_until = 0  # what comes live is read in full
    analyzer.mark_caught_up()
    return end


def _catch_up_by_hits(path: Path, analyzer: Analyzer, scan: BackScan, tail_bytes: int) -> int:
    """The startup in full up to its ready line; from there to the last `tail_bytes` only the lines the scan
    hit (what is not a serving number), each open traceback read to its end and everything after a hit that ends
    the serving (a death, a new launch) in full; then the tail in full. The same story as the skim, one read."""
    first_no = analyzer.next_no  # the number of the line at scan.start
    tail = max(scan.start, scan.size - tail_bytes)
    with path.open("rb") as f:
        f.seek(scan.start)
        fed, _ = analyze_file(f, analyzer, str(path), complete_only=True, clock=time.time, until=analyzer.serving)
        if not analyzer.serving():
            return scan.start + fed  # never ready (or failed): read to the end, as a forward read would
        skipped_from = analyzer.next_no
        pos = None  # where the lines read one by one ended, once any was
        for off, below in scan.hits:
            no = first_no + scan.newlines - below
            if no < analyzer.next_no:
                continue
            if off >= tail or stop_requested() is not None:
                break
            f.seek(off)
            analyzer.skip_to(no)
            _feed_line(f, analyzer)
            while analyzer.tracker.wants_all_lines and f.tell() < tail and _feed_line(f, analyzer):
                pass  # a traceback opened: its lines in full, as a forward read gives them
            pos = f.tell()
            if not analyzer.serving():
                break  # a death or a new launch: what follows is read in full
        if analyzer.serving() and (pos is None or pos < tail):
            pos = _line_start_at(f, tail, scan.size)
            f.seek(pos)
            analyzer.skip_to(first_no + scan.newlines - f.read(scan.size - pos).count(b"\n"))
        assert pos is not None
        if analyzer.next_no > skipped_from:
            analyzer.skimmed_from, analyzer.skimmed_to = skipped_from, analyzer.next_no - 1
        f.seek(pos)
        fed, _ = analyze_file(f, analyzer, str(path), complete_only=True, clock=time.time)
    return pos + fed


def _feed_line(f: BinaryIO, analyzer: Analyzer) -> bool:
    """Feed the line at `f`'s position (its head, if it is over-long) and move past it; False at the end or at a
    partial last line (a live file still writing it: the tail read takes it)."""
    here = f.tell()
    line = f.readline(MAX_LINE)
    if not line.endswith(b"\n"):
        rest = f.readline()
        if not rest.endswith(b"\n"):
            f.seek(here)
            return False
        line += b"\n"
    analyzer.feed(line, time.time())
    return True


def _line_start_at(f: BinaryIO, at: int, size: int) -> int:
    """The start of the first line that begins at or after `at`, or of the last complete line if none does
    (the tail always holds what the server said last, and its clock)."""
    if at > 0:
        f.seek(at - 1)
        if f.read(1) != b"\n":
            f.readline()
            at = f.tell()
    if at >= size and size > 0:
        base = max(0, size - KEEP)
        f.seek(base)
        block = f.read(size - base)  # to the scan's size, not past it: the file may have grown since
        cut = block.rfind(b"\n", 0, len(block) - 1)
        at = base + cut + 1 if cut >= 0 else base
    return at


def open_file(spec: Spec, opening: Opening) -> FileFollower:
    path = Path(spec.path)
    kind = check_path(path)  # a device or a /proc file is refused before anything is read
    start = 0
    if kind is Kind.FILE:  # a FIFO has no past to catch up on: it is read as it comes
        analyzer, sink = opening.analyzer, opening.sink
        try:  # unreadable (another user's 0600 log): one line, as `report` says it, not an internal error
            with path.open("rb"):
                pass
        except OSError as e:
            raise UsageError(f"{path}: cannot open: {e.strerror or e}") from None
        scan, begin = None, 0
        if not opening.from_start:
            rules = list(opening.rules)
            marker = launch_marker(rules)
            scan = scan_back(path, marker, skim_prefilter_for(rules).line_starts)
            begin = scan.start if scan is not None else last_launch_offset(path, marker)
        with caught_while_busy():  # a stop signal ends the catch-up; the summary covers what was read
            start = catch_up(path, analyzer, begin, scan)
        said = analyzer.tracker.verdict()
        # A launch that already failed is over: wait for the next one (a supervisor's restart). One that is
        # ready is the server as it stands for a watch that follows it or keeps a probe's state file (a
        # sidecar restarted after the server came up must not call a healthy server stalled); for any other
        # watch it is a launch already over (its server may have stopped since), and a new one is waited for.
        ready = said == "ready"
        opening.await_new = not opening.from_start and (said == "failed" or (ready and not opening.attach_ready))
        if not opening.from_start and ready and opening.attach_ready:
            opening.note(already_ready(spec.text, analyzer))
        if opening.await_new:
            opening.note(f"the last launch in {spec.text} already ended ({said}); waiting for a new launch")
        else:
            for ev in analyzer.tracker.snapshot():  # what the current launch went through before we looked
                sink.event(ev, time.time())
    return FileFollower(path, start=start, note=opening.note)


def already_ready(source: str, analyzer: Analyzer) -> str:
    """The note for a watch that arrives after the launch was ready: since when, by the log's own clock."""
    launch = analyzer.tracker.launch
    ready = launch.ready if launch is not None else None
    t = analyzer.ready_log_t
    when = f" since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t))} by the log's clock" if t else ""
    line = f" (line {ready.line_no})" if ready is not None and ready.line_no else ""
    return f"the last launch in {source} was already ready{when}{line}"


__all__ = ["SERVING_TAIL", "Opening", "already_ready", "catch_up", "open_file", "open_source"]
