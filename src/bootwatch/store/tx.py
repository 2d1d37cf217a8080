"""One write transaction: BEGIN IMMEDIATE takes the write lock at once (waiting out other writers through the
busy timeout), so what is read inside it cannot change before the commit."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator


@contextlib.contextmanager
def write_transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        if db.in_transaction:  # SQLite may have rolled back already (a full disk does)
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


__all__ = ["write_transaction"]
