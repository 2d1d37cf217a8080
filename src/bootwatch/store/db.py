"""The history store: an SQLite file (WAL, private) holding the last startups seen here and their phases.

Several bootwatch processes may write at once (replicas watched in parallel, CI jobs): each startup goes in
with its phases in one write transaction, and SQLite's locks order the writers. A file that is no database
(garbage, cut short, a directory in its place) is moved aside once and a fresh store begins; a store that
cannot be written (read-only, disk full) raises, and the caller decides how loud to be.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from bootwatch.store.legacy import read_legacy
from bootwatch.store.location import (
    DB_NAME,
    LEGACY_NAME,
    ensure_dir,
    exclusive,
    home,
    is_regular,
    private_file,
    tighten,
)
from bootwatch.store.model import (
    NAME_CAP,
    TEXT_CAP,
    Command,
    StoredPhase,
    StoredStartup,
    args_json,
    clean,
    key_args,
    line_no,
    number,
    startup_shape,
    timestamp,
)
from bootwatch.store.schema import StoreTooNew, migrate
from bootwatch.store.tx import write_transaction

KEEP = 5000  # startups kept; older ones are pruned as new ones arrive
BUSY_TIMEOUT_MS = 30_000  # a writer waits this long for another's transaction (each takes milliseconds)
# How long the current call waits instead (`busy_timeout`): recording a startup whose verdict is already out
# must not hold the exit for 30 s behind a store that another program keeps locked.
_BUSY_MS: ContextVar[int] = ContextVar("bootwatch_store_busy_ms", default=BUSY_TIMEOUT_MS)


@contextlib.contextmanager
def busy_timeout(ms: int) -> Iterator[None]:
    token = _BUSY_MS.set(ms)
    try:
        yield
    finally:
        _BUSY_MS.reset(token)


_CORRUPT_CODES = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB (primary codes; extended ones add high bits)


class StoreError(Exception):
    """The store cannot be used now; the message says why in a few words."""


class CorruptStore(StoreError):
    pass


def is_corrupt(e: sqlite3.Error) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _CORRUPT_CODES


class Match(StrEnum):
    """How close the past startups `similar` found are to the one asked about."""

    ARGS = "engine+model+args"
    MODEL = "engine+model+startup flags"


@dataclass(frozen=True)
class Similar:
    match: Match | None  # None: nothing at all on record
    startups: tuple[StoredStartup, ...]


_COLUMNS = (
    "id",
    "started_at",
    "ended_at",
    "host",
    "source",
    "command",
    "engine",
    "engine_version",
    "model",
    "args",
    "verdict",
    "elapsed_s",
    "time_to_ready_s",
    "root_cause",
    "root_cause_category",
    "ready_line_no",
    "launch_key",
    "caught_up",
)
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM startups"


def _connect(path: Path) -> sqlite3.Connection:
    # mode=rw: SQLite must never create the file itself (it would make it 0644); private_file made it 0600.
    # Autocommit mode: transactions are begun explicitly (BEGIN IMMEDIATE), never implicitly by the module.
    db = sqlite3.connect(
        f"file:{quote(str(path))}?mode=rw", uri=True, timeout=_BUSY_MS.get() / 1000, isolation_level=None
    )
    try:
        db.execute(f"PRAGMA busy_timeout = {_BUSY_MS.get()}")
        _wal(db)
        db.execute("PRAGMA synchronous = NORMAL")  # safe in WAL mode; a power cut may lose the last startup only
        rows = db.execute("PRAGMA quick_check").fetchall()
        if rows != [("ok",)]:
            raise CorruptStore(f"integrity check: {rows[0][0]}")
    except BaseException:
        db.close()
        raise
    return db


def _wal(db: sqlite3.Connection) -> None:
    """Switch to WAL. Several processes opening a new file at once race to set it; the loser may be told
    "locked" without the busy handler being asked, so it asks again."""
    deadline = time.monotonic() + _BUSY_MS.get() / 1000
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL").fetchone()
            return
        except sqlite3.OperationalError as e:
            if ("locked" not in str(e) and "busy" not in str(e)) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


class Store:
    """An open store. Use `open_store` (or `with_store`, which also survives a corrupt file)."""

    def __init__(self, db: sqlite3.Connection, path: Path, keep: int) -> None:
        self.db, self.path, self.keep = db, path, keep

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- writing ----------------------------------------------------------------------------------------
    def add(self, startup: StoredStartup) -> int:
        """Store one startup and its phases in one transaction; returns its id. A launch already on record
        (the same `launch_key`: its log read again) stays one row: the better-informed read of the two is kept."""
        with write_transaction(self.db):
            if startup.launch_key is not None:
                row = self.db.execute(
                    "SELECT id, verdict, caught_up FROM startups WHERE launch_key = ?", (startup.launch_key,)
                ).fetchone()
                if row is not None:
                    if not _better(startup, verdict=row[1], caught_up=bool(row[2])):
                        return int(row[0])
                    self.db.execute("DELETE FROM phases WHERE startup_id = ?", (row[0],))
                    self.db.execute("DELETE FROM startups WHERE id = ?", (row[0],))
            new_id = self._insert(startup)
            self._prune()
        return new_id

    def import_legacy(self, legacy: Path) -> int:
        """Read the pre-SQLite history file into the store once, then rename it. Whether it is still there is
        decided inside the write transaction: two processes starting at once import it once between them."""
        with write_transaction(self.db):
            try:
                data = legacy.read_bytes()
            except FileNotFoundError:
                return 0
            entries = sorted(read_legacy(data), key=lambda s: s.ended_at)[-self.keep :]
            for entry in entries:
                self._insert(entry)
            self._prune()
            # Renamed before the commit: no other writer can see the file once this transaction's rows exist.
            done = legacy.with_name(legacy.name + ".imported")
            os.replace(legacy, done)
        tighten(done, 0o600)  # the old file was 0644 and holds its failure lines unredacted
        return len(entries)

    def _insert(self, s: StoredStartup) -> int:
        cur = self.db.execute(
            "INSERT INTO startups (started_at, ended_at, host, source, command, engine, engine_version, model, "
            "args, verdict, elapsed_s, time_to_ready_s, root_cause, root_cause_category, ready_line_no, "
            "launch_key, caught_up) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                s.started_at,
                s.ended_at,
                s.host,
                s.source,
                str(s.command),
                s.engine,
                s.engine_version,
                s.model,
                args_json(s.args),
                s.verdict,
                s.elapsed_s,
                s.time_to_ready_s,
                s.root_cause,
                s.root_cause_category,
                s.ready_line_no,
                s.launch_key,
                int(s.caught_up),
            ),
        )
        new_id = cur.lastrowid
        assert new_id is not None
        self.db.executemany(
            "INSERT INTO phases (startup_id, seq, name, draft, start_offset_s, duration_s, progress) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (new_id, i, p.name, int(p.draft), p.start_offset_s, p.duration_s, p.progress)
                for i, p in enumerate(s.phases)
            ],
        )
        return new_id

    def _prune(self) -> None:
        row = self.db.execute("SELECT id FROM startups ORDER BY id DESC LIMIT 1 OFFSET ?", (self.keep,)).fetchone()
        if row is not None:
            self.db.execute("DELETE FROM phases WHERE startup_id <= ?", (row[0],))
            self.db.execute("DELETE FROM startups WHERE id <= ?", (row[0],))

    # ---- reading ----------------------------------------------------------------------------------------
    def count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM startups").fetchone()[0])

    def recent(self, limit: int) -> list[StoredStartup]:
        """The last `limit` startups, oldest first."""
        return list(reversed(self._query(f"{_SELECT} ORDER BY id DESC LIMIT ?", (limit,))))

    def by_ids(self, ids: Iterable[int]) -> dict[int, StoredStartup]:
        """The startups with these ids (those that exist), by id."""
        wanted = sorted({int(i) for i in ids})
        if not wanted:
            return {}
        marks = ", ".join("?" * len(wanted))
        return {s.id: s for s in self._query(f"{_SELECT} WHERE id IN ({marks})", wanted) if s.id is not None}

    def similar(self, engine: str, model: str | None, args: dict[str, Any], host: str | None, limit: int) -> Similar:
        """Past ready startups like this one, the closest kind that exists: same engine, model and arguments;
        else same engine and model started the same way (the settings in STARTUP_KEYS: parallelism,
        speculative decoding, compile and graphs). Never another model's, nor another way of starting: a 7B
        EAGLE startup says nothing of a 0.5B one. `host` None looks at every host. Newest first."""
        engine = clean(engine, NAME_CAP)
        model = clean(model, TEXT_CAP) if model else None
        where = "verdict = 'ready' AND engine = ? AND model IS ?"
        params: list[Any] = [engine, model]
        if host is not None:
            where += " AND host = ?"
            params.append(clean(host, TEXT_CAP))
        wanted = key_args(args)
        exact = self._query(
            f"{_SELECT} WHERE {where} AND args = ? ORDER BY id DESC LIMIT ?", (*params, args_json(wanted), limit)
        )
        if exact:
            return Similar(Match.ARGS, tuple(exact))
        shape = startup_shape(wanted)
        alike = [
            s
            for s in self._query(f"{_SELECT} WHERE {where} ORDER BY id DESC LIMIT ?", (*params, limit * 5))
            if startup_shape(s.args) == shape
        ][:limit]
        return Similar(Match.MODEL, tuple(alike)) if alike else Similar(None, ())

    def _query(self, sql: str, params: Iterable[Any]) -> list[StoredStartup]:
        # One read transaction: the startups and their phases come from the same moment.
        self.db.execute("BEGIN")
        try:
            rows = self.db.execute(sql, tuple(params)).fetchall()
            phases: dict[int, list[StoredPhase]] = {}
            ids = [r[0] for r in rows]
            if ids:
                marks = ", ".join("?" * len(ids))
                for sid, name, draft, offset, duration, progress in self.db.execute(
                    "SELECT startup_id, name, draft, start_offset_s, duration_s, progress FROM phases "
                    f"WHERE startup_id IN ({marks}) ORDER BY startup_id, seq",
                    ids,
                ):
                    phase = StoredPhase(
                        _text(name) or "?", bool(draft), number(offset), number(duration), number(progress)
                    )
                    phases.setdefault(sid, []).append(phase)
        finally:
            self.db.execute("COMMIT")
        out: list[StoredStartup] = []
        for r in rows:
            try:
                out.append(_startup(r, tuple(phases.get(r[0], ()))))
            except _BadRow as e:
                _skipped(self.path, str(e))
        return out


class _BadRow(ValueError):
    """A row another program (or a hand edit) left with a value no startup has: it is skipped, not shown."""


_TOLD: set[Path] = set()  # the stores whose skipped rows were already said, in this process


def _skipped(path: Path, why: str) -> None:
    if path not in _TOLD:
        _TOLD.add(path)
        _stderr(f"bootwatch: note: skipped a history row that holds no startup ({why}; {path})")


def _text(value: object) -> str | None:
    """A TEXT column as text: SQLite keeps whatever type a writer gave (a number, a blob) whatever the column."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return str(value)


def _startup(r: tuple[Any, ...], phases: tuple[StoredPhase, ...]) -> StoredStartup:
    """A row as a startup; _BadRow when its times or its command are not ones a startup can have. A number
    that is not one (text in a REAL column, NaN) is unknown, as a startup without it would be."""
    row = dict(zip(_COLUMNS, r, strict=True))
    started, ended = timestamp(row["started_at"]), timestamp(row["ended_at"])
    if started is None or ended is None:
        bad = "started_at" if started is None else "ended_at"
        raise _BadRow(f"id {row['id']}: {bad} {str(row[bad])[:40]!r} is not a time")
    try:
        command = Command(row["command"])
    except ValueError:
        raise _BadRow(f"id {row['id']}: command {str(row['command'])[:40]!r}") from None
    try:
        args = json.loads(row["args"])
    except (TypeError, ValueError):
        args = {}
    return StoredStartup(
        id=row["id"],
        started_at=started,
        ended_at=ended,
        host=_text(row["host"]) or "",
        source=_text(row["source"]) or "",
        command=command,
        engine=_text(row["engine"]) or "unknown",
        engine_version=_text(row["engine_version"]),
        model=_text(row["model"]),
        args=args if isinstance(args, dict) else {},
        verdict=_text(row["verdict"]) or "unknown",
        elapsed_s=number(row["elapsed_s"]),
        time_to_ready_s=number(row["time_to_ready_s"]),
        root_cause=_text(row["root_cause"]),
        root_cause_category=_text(row["root_cause_category"]),
        ready_line_no=line_no(row["ready_line_no"]),
        phases=phases,
        launch_key=_text(row["launch_key"]),
        caught_up=bool(row["caught_up"]),
    )


_FINAL = ("ready", "failed")


def _better(new: StoredStartup, verdict: str, caught_up: bool) -> bool:
    """Whether a new read of a launch on record says more than the stored one: an ended startup over one
    still starting when its watch stopped, then a live read over a catch-up (which knows no arrival times)."""
    if (new.verdict in _FINAL) != (verdict in _FINAL):
        return new.verdict in _FINAL
    return caught_up and not new.caught_up


# ---- opening -----------------------------------------------------------------------------------------------
def store_path(base: Path | None = None) -> Path:
    return (base or home()) / DB_NAME


def open_store(base: Path | None = None, keep: int = KEEP) -> Store:
    """Open (creating if needed) the store under `base`. Raises CorruptStore for a file that is no store,
    StoreError for one this bootwatch cannot use, sqlite3.Error or OSError when it cannot be written."""
    base = base or home()
    ensure_dir(base)
    path = base / DB_NAME
    db = _open_file(path)
    store = Store(db, path, keep)
    try:
        migrate(db)
        legacy = base / LEGACY_NAME
        if legacy.exists():
            store.import_legacy(legacy)
    except StoreTooNew as e:
        store.close()
        raise StoreError(f"written by a newer bootwatch: {e}") from None
    except sqlite3.DatabaseError as e:
        store.close()
        if is_corrupt(e):
            raise CorruptStore(str(e)) from None
        raise
    except BaseException:
        store.close()
        raise
    return store


def _open_file(path: Path) -> sqlite3.Connection:
    for attempt in range(3):
        if not private_file(path):
            raise CorruptStore("not a regular file")
        try:
            return _connect(path)
        except sqlite3.DatabaseError as e:
            if is_corrupt(e):
                raise CorruptStore(str(e)) from None
            # Another bootwatch moved a corrupt file aside between the two steps: make the fresh one.
            if os.path.lexists(path) or attempt == 2:
                raise
    raise AssertionError("unreachable")


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr)


def move_aside(path: Path, reason: str, report: Callable[[str], None] = _stderr) -> Path | None:
    """Rename a corrupt store (with its WAL) out of the way, once: under a lock, and only if it is still
    corrupt then. Another process may have moved it already and begun a fresh one, which must stay."""
    with exclusive(path.parent):
        if not _still_corrupt(path):
            return None
        dest = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
        os.rename(path, dest)
        wal = path.with_name(path.name + "-wal")
        if wal.exists():  # the WAL belongs to the old file: left here, SQLite would replay it into the new one
            os.rename(wal, dest.with_name(dest.name + "-wal"))
        shm = path.with_name(path.name + "-shm")
        if shm.exists():
            os.unlink(shm)
    report(f"bootwatch: history store {path} is corrupt ({reason}); moved aside to {dest}")
    return dest


def _still_corrupt(path: Path) -> bool:
    if not os.path.lexists(path):
        return False
    if not is_regular(path):
        return True
    try:
        _connect(path).close()
    except CorruptStore:
        return True
    except sqlite3.DatabaseError as e:
        return is_corrupt(e)
    return False


T = TypeVar("T")


def with_store(
    op: Callable[[Store], T], base: Path | None = None, keep: int = KEEP, report: Callable[[str], None] = _stderr
) -> T:
    """Run `op` on the store; a corrupt file is moved aside (and said so on stderr) and `op` runs on a fresh
    store. Other failures (read-only, full disk, too new) propagate."""
    base = base or home()
    for attempt in (1, 2):
        try:
            with open_store(base, keep) as store:
                try:
                    return op(store)
                except sqlite3.DatabaseError as e:
                    if is_corrupt(e):
                        raise CorruptStore(str(e)) from None
                    raise
        except CorruptStore as e:
            if attempt == 2:
                raise
            move_aside(base / DB_NAME, str(e), report)
    raise AssertionError("unreachable")


__all__ = [
    "KEEP",
    "busy_timeout",
    "CorruptStore",
    "Match",
    "Similar",
    "Store",
    "StoreError",
    "move_aside",
    "open_store",
    "store_path",
    "with_store",
]
