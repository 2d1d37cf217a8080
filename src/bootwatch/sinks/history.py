"""The history sink: each startup watched by `watch` or `run` goes into the store; `history` shows them."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from bootwatch.durations import fmt_duration
from bootwatch.errors import UsageError
from bootwatch.text import printable

if TYPE_CHECKING:
    from bootwatch.store import StoredStartup

# bootwatch.store (sqlite3 and its helpers) is imported when a startup ends, not when a watch starts: every
# millisecond before the first line is read is lag.

_VERDICT_STYLE = {"ready": "green", "failed": "red", "stalled": "yellow", "timeout": "red", "incomplete": "yellow"}


def record(summary: dict[str, Any], source: str, command: str) -> None:
    """Add one startup to the store. The watch is over and its exit code decided: whatever goes wrong here
    (a read-only home, a full disk, a store from a newer bootwatch, a summary this code did not foresee) is a
    one-line note on stderr, never a failure of the watch."""
    try:
        from bootwatch.store import startup_from_summary, with_store

        startup = startup_from_summary(summary, source, command, time.time())
        with_store(lambda s: s.add(startup))
    except Exception as e:  # noqa: BLE001 - see the docstring: history never fails a watch
        print(f"bootwatch: note: this startup was not added to the history ({_reason(e)})", file=sys.stderr)


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
    parts = [f"{'draft:' if p.draft else ''}{p.name}={fmt_duration(p.duration_s).replace(' ', '')}"
             for p in s.phases if p.duration_s is not None and p.name not in ("start", "ready")]
    return _text(" ".join(parts))


def render(entries: list[StoredStartup], console: Console) -> None:
    from bootwatch.store import store_path

    if not entries:
        console.print(Text(f"no startups recorded yet ({store_path()})"))
        return
    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("when", "engine", "model", "outcome", "to ready", "phases", "source"):
        t.add_column(col, overflow="fold")
    # A root cause can be 2 KB; the table shows its start, --json all of it.
    t.add_column("root cause", overflow="ellipsis", no_wrap=True, max_width=60)
    for s in entries:
        engine = s.engine + (f" {s.engine_version}" if s.engine_version else "")
        outcome = s.verdict + (f" ({s.root_cause_category})" if s.root_cause_category else "")
        took = s.time_to_ready_s if s.verdict == "ready" and s.time_to_ready_s is not None else s.elapsed_s
        t.add_row(Text(time.strftime("%Y-%m-%d %H:%M", time.localtime(s.started_at))), _text(engine),
                  _text(s.model), _text(outcome, _VERDICT_STYLE.get(s.verdict, "")), Text(fmt_duration(took)),
                  _phases(s), _text(s.source), _text(s.root_cause))
    console.print(t)


__all__ = ["load", "record", "render"]
