"""The history store: one JSON line per startup watched on this machine (watch and run)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bootwatch.sinks.summary_text import fmt_duration

KEEP = 1000  # entries kept when the file is compacted


def history_path() -> Path:
    base = os.environ.get("BOOTWATCH_HOME") or os.path.join(
        os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "bootwatch")
    return Path(base) / "history.jsonl"


def record(summary: dict[str, Any], source: str, command: str) -> None:
    """Append one startup; a failure to write history never fails the watch itself."""
    phases = {p["name"] + ("_draft" if p.get("draft") else ""): p.get("duration_s") for p in summary.get("phases", [])
              if p["name"] not in ("start", "ready")}
    entry = {
        "time": round(time.time(), 3), "command": command, "source": source, "verdict": summary.get("verdict"),
        "engine": summary.get("engine"), "engine_version": summary.get("engine_version"),
        "model": (summary.get("facts") or {}).get("model"), "elapsed_s": summary.get("elapsed_s"),
        "phases": phases, "failure": (summary.get("failure") or {}).get("text"),
        "warnings": [w["kind"] for w in summary.get("warnings") or []],
    }
    path = history_path()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
        if path.stat().st_size > KEEP * 4096:
            lines = path.read_text("utf-8").splitlines()[-KEEP:]
            tmp = path.with_suffix(".tmp")
            tmp.write_text("\n".join(lines) + "\n", "utf-8")
            tmp.replace(path)


def load(limit: int | None = None) -> list[dict[str, Any]]:
    path = history_path()
    out = []
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out[-limit:] if limit else out


def render(entries: list[dict[str, Any]], console: Console) -> None:
    if not entries:
        console.print(f"no startups recorded yet ({history_path()})")
        return
    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("when", "engine", "model", "outcome", "total", "phases", "source"):
        t.add_column(col)
    for e in entries:
        phases = " ".join(f"{k}={fmt_duration(v)}" for k, v in (e.get("phases") or {}).items() if v is not None)
        engine = (e.get("engine") or "?") + (f" {e['engine_version']}" if e.get("engine_version") else "")
        t.add_row(time.strftime("%Y-%m-%d %H:%M", time.localtime(e["time"])), engine, str(e.get("model") or "-"),
                  str(e.get("verdict")), fmt_duration(e.get("elapsed_s")), phases, str(e.get("source") or ""))
    console.print(t)
