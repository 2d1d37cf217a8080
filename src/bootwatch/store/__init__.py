"""The history store: past startups seen on this machine (SQLite), the source of ETAs and comparisons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bootwatch.store.db import (
    KEEP,
    CorruptStore,
    Match,
    Similar,
    Store,
    StoreError,
    move_aside,
    open_store,
    store_path,
    with_store,
)
from bootwatch.store.model import Command, StoredPhase, StoredStartup, key_args, startup_from_summary


def similar(
    engine: str, model: str | None, args: dict[str, Any], host: str | None, limit: int = 10, base: Path | None = None
) -> Similar:
    """Past ready startups like this one on `host` (None: any host), closest kind first: same engine, model
    and key arguments; else same engine and model; else same engine. `args` may be a summary's facts."""
    return with_store(lambda s: s.similar(engine, model, args, host, limit), base)


__all__ = [
    "KEEP",
    "Command",
    "CorruptStore",
    "Match",
    "Similar",
    "Store",
    "StoreError",
    "StoredPhase",
    "StoredStartup",
    "key_args",
    "move_aside",
    "open_store",
    "similar",
    "startup_from_summary",
    "store_path",
    "with_store",
]
