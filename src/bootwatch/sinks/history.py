"""The history sink: each startup watched by `watch` or `run` goes into the store; `history` shows them."""

from __future__ import annotations

import stat
import sys
import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from bootwatch.durations import fmt_duration
from bootwatch.errors import UsageError
from bootwatch.sources.file import FINGERPRINT
from bootwatch.text import printable

if TYPE_CHECKING:
    from bootwatch.store import StoredStartup

# bootwatch.store (sqlite3 and its helpers) is imported when a startup ends, not when a watch starts: every
# millisecond before the first line is read is lag.

_VERDICT_STYLE = {"ready": "green", "failed": "red", "stalled": "yellow", "timeout": "red", "incomplete": "yellow"}


# The verdict is out: a store locked longer than this is skipped, with a note. Other writers' transactions take
# milliseconds, but ten at once on a loaded 2-core machine took over 2 s (the concurrency test lost a row).
RECORD_BUSY_MS = 5000


def record(summary: dict[str, Any], source: str, command: str) -> None:
    """Add one startup to the store. The watch is over and its exit code decided: whatever goes wrong here
    (a read-only home, a full disk, a store from a newer bootwatch, a summary this code did not foresee) is a
    one-line note on stderr, never a failure of the watch."""
    try:
        from bootwatch.store import startup_from_summary, with_store
        from bootwatch.store.db import busy_timeout

        startup = startup_from_summary(summary, source, command, time.time(), launch_key(summary, source))
        with busy_timeout(RECORD_BUSY_MS):
            with_store(lambda s: s.add(startup))
    except Exception as e:  # noqa: BLE001 - see the docstring: history never fails a watch
        print(f"bootwatch: note: this startup was not added to the history ({_reason(e)})", file=sys.stderr)


def launch_key(summary: dict[str, Any], source: str) -> str | None:
    """What names this launch however often its log is read: the file's identity (device, inode and its
    first bytes, as the follower knows a file) or the source's name, with where the launch begins in it and
    when by the log's clock. None where nothing tells one launch from another."""
    import hashlib
    import os

    start_line, log_t = summary.get("launch_start_line"), summary.get("launch_t")
    if not isinstance(start_line, int):
        return None
    where: str | None = None
    try:
        # Only a regular file is opened: opening a FIFO would wait for a writer that may never come.
        if stat.S_ISREG(os.stat(source).st_mode):
            with open(source, "rb") as f:
                st = os.fstat(f.fileno())
                where = f"file:{st.st_dev}:{st.st_ino}:{hashlib.sha256(f.read(FINGERPRINT)).hexdigest()}"
    except OSError:
        pass  # not a local file: a remote or container source, named by its text
    if where is None:
        if log_t is None:
            return None  # a container's or remote log without times: a restart would look the same
        where = f"source:{source}"
    return hashlib.sha256(f"{where}:{start_line}:{log_t}".encode("utf-8", "backslashreplace")).hexdigest()


def _reason(e: BaseException) -> str:
    import sqlite3

    from bootwatch.store import StoreError, store_path

    if isinstance(e, OSError) and e.strerror:
        return f"{e.filename}: {e.strerror}" if e.filename else e.strerror
    if isinstance(e, sqlite3.Error | StoreError):
        return f"{store_path()}: {e}"
    return f"{type(e).__name__}: {e}"


def load(limit: int) -> list[StoredStartup]:
    """The last `limit` startups, oldest first. A store that cannot be read is a UsageError (exit 2)."""
    import sqlite3

    from bootwatch.store import StoreError, with_store

    try:
        return with_store(lambda s: s.recent(limit))
    except (OSError, sqlite3.Error, StoreError) as e:
        raise UsageError(f"cannot read the history store ({_reason(e)})") from None


def _text(value: object, style: str = "") -> Text:
    # Stored text came from logs: a Text is never parsed for markup, and printable() escapes control bytes.
    return Text("-" if value is None or value == "" else printable(str(value)), style=style)


def _phases(s: StoredStartup) -> Text:
    # name=4.2s with no space inside, so that the column wraps between phases, not inside one.
    parts = [
        f"{'draft:' if p.draft else ''}{p.name}={fmt_duration(p.duration_s).replace(' ', '')}"
        for p in s.phases
        if p.duration_s is not None and p.name not in ("start", "ready")
    ]
    return _text(" ".join(parts))


def render(entries: list[StoredStartup], console: Console) -> None:
    from bootwatch.store import store_path

    if not entries:
        console.print(Text(f"no startups recorded yet ({store_path()})"))
        return
    t = Table(box=None, header_style="bold", pad_edge=False)
    t.add_column("id", justify="right", no_wrap=True)  # what --compare takes
    for col in ("when", "engine", "model", "outcome", "to ready", "phases", "source"):
        t.add_column(col, overflow="fold")
    # A root cause can be 2 KB; the table shows its start, --json all of it.
    t.add_column("root cause", overflow="ellipsis", no_wrap=True, max_width=60)
    for s in entries:
        engine = s.engine + (f" {s.engine_version}" if s.engine_version else "")
        outcome = s.verdict + (f" ({s.root_cause_category})" if s.root_cause_category else "")
        took = s.time_to_ready_s if s.verdict == "ready" and s.time_to_ready_s is not None else s.elapsed_s
        t.add_row(
            Text(str(s.id) if s.id is not None else "-"),
            Text(time.strftime("%Y-%m-%d %H:%M", time.localtime(s.started_at))),
            _text(engine),
            _text(s.model),
            _text(outcome, _VERDICT_STYLE.get(s.verdict, "")),
            Text(fmt_duration(took)),
            _phases(s),
            _text(s.source),
            _text(s.root_cause),
        )
    console.print(t)


def compare(a: int, b: int, console: Console) -> None:
    """Two startups side by side: what differs in how they were started, then each phase's duration and the
    change. An id that is not in the store is a UsageError (exit 2)."""
    import sqlite3

    from bootwatch.store import StoreError, with_store

    try:
        found = with_store(lambda s: s.by_ids((a, b)))
    except (OSError, sqlite3.Error, StoreError) as e:
        raise UsageError(f"cannot read the history store ({_reason(e)})") from None
    missing = [str(i) for i in (a, b) if i not in found]
    if missing:
        raise UsageError(
            f"--compare: no startup with id {' or '.join(missing)} in the history (ids: bootwatch history --json)"
        )
    sa, sb = found[a], found[b]
    t = Table(box=None, header_style="bold", pad_edge=False)
    t.add_column("")
    t.add_column(f"#{a}", overflow="fold")
    t.add_column(f"#{b}", overflow="fold")
    t.add_column("change")

    def took(s: StoredStartup) -> float | None:
        return s.time_to_ready_s if s.verdict == "ready" and s.time_to_ready_s is not None else s.elapsed_s

    def when(s: StoredStartup) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.started_at))

    t.add_row(Text("started"), Text(when(sa)), Text(when(sb)), Text(""))
    for label, va, vb in (
        ("engine", sa.engine, sb.engine),
        ("version", sa.engine_version, sb.engine_version),
        ("model", sa.model, sb.model),
        ("host", sa.host, sb.host),
        ("outcome", sa.verdict, sb.verdict),
    ):
        t.add_row(Text(label), _text(va), _text(vb), Text("" if va == vb else "differs", style="yellow"))
    for key in sorted(set(sa.args) | set(sb.args)):
        va, vb = sa.args.get(key), sb.args.get(key)
        t.add_row(_text(key), _text(va), _text(vb), Text("" if va == vb else "differs", style="yellow"))
    order: list[tuple[str, bool]] = []
    for s in (sa, sb):
        for p in s.phases:
            if p.name != "ready" and (p.name, p.draft) not in order:
                order.append((p.name, p.draft))
    for name, draft in order:
        da = _phase_total(sa, name, draft)
        db = _phase_total(sb, name, draft)
        t.add_row(
            _text(("draft:" if draft else "") + name), Text(fmt_duration(da)), Text(fmt_duration(db)), _change(da, db)
        )
    ta, tb = took(sa), took(sb)
    t.add_row(
        Text("to ready" if sa.verdict == sb.verdict == "ready" else "total", style="bold"),
        Text(fmt_duration(ta)),
        Text(fmt_duration(tb)),
        _change(ta, tb),
    )
    t.add_row(Text("root cause"), _text(sa.root_cause), _text(sb.root_cause), Text(""))
    console.print(t)


def _phase_total(s: StoredStartup, name: str, draft: bool) -> float | None:
    """A phase's time, summed when it was entered more than once; None when never entered or not timed."""
    durations = [p.duration_s for p in s.phases if p.name == name and p.draft == draft]
    if not durations or any(d is None for d in durations):
        return None
    return float(sum(d for d in durations if d is not None))


def _change(a: float | None, b: float | None) -> Text:
    if a is None or b is None:
        return Text("")
    delta = b - a
    ratio = f" ({b / a:.2f}×)" if a > 0 else ""
    style = "red" if delta > max(1.0, 0.2 * a) else "green" if -delta > max(1.0, 0.2 * a) else ""
    return Text(f"{'+' if delta >= 0 else '-'}{fmt_duration(abs(delta))}{ratio}", style=style)


__all__ = ["compare", "load", "record", "render"]
