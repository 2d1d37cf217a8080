"""The store before SQLite (history.jsonl, one JSON object per line): read once into the new store.

The old file may hold anything a crash or a concurrent compaction left: a cut line, bytes that are not
UTF-8, a line that is JSON but not an object. Such lines are skipped; every good one is kept."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from bootwatch.store.model import (
    NAME_CAP,
    ROOT_CAUSE_CAP,
    TEXT_CAP,
    Command,
    StoredPhase,
    StoredStartup,
    clean,
    clean_opt,
    host_of,
    number,
    timestamp,
)


def _phases(raw: object) -> tuple[StoredPhase, ...]:
    # The old file kept {name or name_draft: duration}, without "start" and "ready": offsets are unknown.
    if not isinstance(raw, dict):
        return ()
    out = []
    for key, duration in raw.items():
        name, draft = (key[: -len("_draft")], True) if key.endswith("_draft") else (key, False)
        out.append(StoredPhase(clean(name, NAME_CAP), draft, None, number(duration)))
    return tuple(out)


def _entry(e: dict[str, Any]) -> StoredStartup | None:
    ended = timestamp(e.get("time"))  # 1e300 would be imported, then break every `history` after it
    if ended is None or e.get("command") not in ("watch", "run"):
        return None
    elapsed = number(e.get("elapsed_s"))
    raw_source = e.get("source")
    source = raw_source if isinstance(raw_source, str) else ""
    failure = e.get("failure") if e.get("verdict") == "failed" else None
    return StoredStartup(
        started_at=round(ended - (elapsed or 0.0), 3),
        ended_at=ended,
        host=clean(host_of(source), TEXT_CAP),
        source=clean(source, TEXT_CAP),
        command=Command(e["command"]),
        engine=clean(e.get("engine") or "unknown", NAME_CAP),
        verdict=clean(e.get("verdict") or "unknown", NAME_CAP),
        engine_version=clean_opt(e.get("engine_version"), NAME_CAP),
        model=clean_opt(e.get("model"), TEXT_CAP),
        elapsed_s=elapsed,
        root_cause=clean_opt(failure, ROOT_CAUSE_CAP),
        phases=_phases(e.get("phases")),
    )


def read_legacy(data: bytes) -> Iterator[StoredStartup]:
    for raw in data.split(b"\n"):
        try:
            e = json.loads(raw.decode("utf-8"))
        except ValueError:  # UnicodeDecodeError and JSONDecodeError are both ValueErrors
            continue
        if isinstance(e, dict):
            entry = _entry(e)
            if entry is not None:
                yield entry


__all__ = ["read_legacy"]
