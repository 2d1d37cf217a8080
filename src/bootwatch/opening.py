"""Opening a SOURCE for a watch: the scheme's own opener (sources/registry.py), or, for a local file, the
catch-up on what it already holds through the Analyzer. That catch-up is why this sits above pipeline and the
sinks while the followers themselves sit below them."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from bootwatch.errors import UsageError
from bootwatch.pipeline import Analyzer, analyze_file, count_lines, launch_marker
from bootwatch.sinks.protocol import Sink
from bootwatch.sources.file import FileFollower, Kind, check_path, last_launch_offset
from bootwatch.sources.interrupts import caught_while_busy
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


def catch_up(path: Path, analyzer: Analyzer, start: int) -> int:
    """Read what the file already holds (from `start`) up to its last complete line; returns where it ended.
    Its events are not kept (a 1 GB history would hold a million); `Tracker.snapshot` says where it stands."""
    if start:
        # Line numbers count from the top of the file, skipped launches included (what `report` says too).
        analyzer.next_no = count_lines(path, start) + 1
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        analyzer.skim_until = analyzer.bytes_seen + max(0, size - start - SERVING_TAIL)
        f.seek(start)
        fed, _ = analyze_file(f, analyzer, str(path), complete_only=True, clock=time.time)
    analyzer.skim_until = 0  # what comes live is read in full
    analyzer.mark_caught_up()
    return start + fed


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
        begin = 0 if opening.from_start else last_launch_offset(path, launch_marker(list(opening.rules)))
        with caught_while_busy():  # a stop signal ends the catch-up; the summary covers what was read
            start = catch_up(path, analyzer, begin)
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
