"""A local file (or FIFO) as a SOURCE: catch up on the current launch, then follow what is written."""

from __future__ import annotations

import time
from pathlib import Path

from bootwatch.pipeline import Analyzer, analyze_file, count_lines, launch_marker
from bootwatch.sources.file import FileFollower, Kind, check_path, last_launch_offset
from bootwatch.sources.registry import Opening
from bootwatch.sources.spec import Spec, parse_unprefixed


def catch_up(path: Path, analyzer: Analyzer, start: int) -> int:
    """Read what the file already holds (from `start`) up to its last complete line; returns where it ended.
    Its events are not kept (a 1 GB history would hold a million); `Tracker.snapshot` says where it stands."""
    if start:
        # Line numbers count from the top of the file, skipped launches included (what `report` says too).
        analyzer.next_no = count_lines(path, start) + 1
    with path.open("rb") as f:
        f.seek(start)
        fed, _ = analyze_file(f, analyzer, str(path), complete_only=True, clock=time.time)
    analyzer.mark_caught_up()
    return start + fed


def parse_spec(text: str) -> Spec:
    return parse_unprefixed(text)


def open_source(spec: Spec, opening: Opening) -> FileFollower:
    path = Path(spec.path)
    kind = check_path(path)  # a device or a /proc file is refused before anything is read
    start = 0
    if kind is Kind.FILE:  # a FIFO has no past to catch up on: it is read as it comes
        analyzer, sink = opening.analyzer, opening.sink
        begin = 0 if opening.from_start else last_launch_offset(path, launch_marker(list(opening.rules)))
        start = catch_up(path, analyzer, begin)
        said = analyzer.tracker.verdict()
        opening.await_new = not opening.from_start and said in ("ready", "failed")
        if opening.await_new:
            opening.note(f"the last launch in {spec.text} already ended ({said}); waiting for a new launch")
        else:
            for ev in analyzer.tracker.snapshot():  # what the current launch went through before we looked
                sink.event(ev, time.time())
    return FileFollower(path, start=start, note=opening.note)
