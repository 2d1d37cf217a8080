"""The store's schema, one migration per version; `PRAGMA user_version` says which ones a file has had."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from bootwatch.store.tx import write_transaction


class StoreTooNew(Exception):
    """The file was written by a newer bootwatch: this one leaves it alone rather than guess at its tables."""


def _v1(db: sqlite3.Connection) -> None:
    db.execute("""
        CREATE TABLE startups (
            id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused after pruning: ids keep the order of arrival
            started_at REAL NOT NULL,
            ended_at REAL NOT NULL,
            host TEXT NOT NULL,
            source TEXT NOT NULL,
            command TEXT NOT NULL CHECK (command IN ('watch', 'run')),
            engine TEXT NOT NULL,
            engine_version TEXT,
            model TEXT,
            args TEXT NOT NULL DEFAULT '{}',  -- canonical JSON (sorted keys): equal settings, equal text
            verdict TEXT NOT NULL,
            elapsed_s REAL,
            time_to_ready_s REAL,
            root_cause TEXT,
            root_cause_category TEXT,
            ready_line_no INTEGER
        )""")
    db.execute("""
        CREATE TABLE phases (
            startup_id INTEGER NOT NULL REFERENCES startups(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            name TEXT NOT NULL,
            draft INTEGER NOT NULL DEFAULT 0,
            start_offset_s REAL,
            duration_s REAL,
            progress REAL,
            PRIMARY KEY (startup_id, seq)
        ) WITHOUT ROWID""")
    # What an ETA asks: the last ready startups of this engine (+ model (+ args)) on this host.
    db.execute(
        "CREATE INDEX startups_ready_by_config ON startups (host, engine, model, args, id) WHERE verdict = 'ready'"
    )
    db.execute("CREATE INDEX startups_ready_any_host ON startups (engine, model, args, id) WHERE verdict = 'ready'")


def _v2(db: sqlite3.Connection) -> None:
    # One launch is one startup however often its log is read: the key names the file (or source) and the
    # launch in it. A catch-up read (a watch that read the launch's past at once) is marked: its durations
    # come from the log's own clock or are unknown, never from arrival time.
    db.execute("ALTER TABLE startups ADD COLUMN launch_key TEXT")
    db.execute("ALTER TABLE startups ADD COLUMN caught_up INTEGER NOT NULL DEFAULT 0")
    db.execute("CREATE UNIQUE INDEX startups_by_launch ON startups (launch_key) WHERE launch_key IS NOT NULL")


Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: tuple[Migration, ...] = (_v1, _v2)  # MIGRATIONS[n] takes a file from version n to n + 1
VERSION = len(MIGRATIONS)


def user_version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def migrate(db: sqlite3.Connection) -> None:
    """Bring the file to VERSION. The version is read again once the write lock is held: another bootwatch
    may have migrated it in the meantime."""
    if user_version(db) == VERSION:
        return
    with write_transaction(db):
        current = user_version(db)
        if current > VERSION:
            raise StoreTooNew(f"it has schema version {current}; this bootwatch knows up to {VERSION}")
        for step in MIGRATIONS[current:]:
            step(db)
        db.execute(f"PRAGMA user_version = {VERSION}")


__all__ = ["MIGRATIONS", "VERSION", "StoreTooNew", "migrate", "user_version"]
