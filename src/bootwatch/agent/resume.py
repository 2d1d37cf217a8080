"""What one bounded wait leaves for the next: a small JSON file per source, so a repeated call knows the
launch it is in, where the previous call stopped, and what it saw there.

A file source is resumed from the byte where its current launch began (kept, so no backward search and no
line count of what came before), with line numbers counted from the line number kept for it; the launch is
analysed again from there, because the tracker's state (an open traceback, the phase and its progress)
must be exactly what one long watch would have. What arrived after `offset` is what is new. The wall-clock
times each phase began and ended are kept too: lines read again carry no time of their own (a log without
timestamps), and without them every call would see the whole launch happen in an instant."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bootwatch.store.location import ensure_dir

VERSION = 1


@dataclass
class FileMark:
    """Where a file source stands: which file (device and inode: a rotated or replaced file starts over),
    the byte and line its current launch began at, and how far the last call read."""

    dev: int
    ino: int
    launch_offset: int
    launch_line: int
    offset: int


@dataclass
class ServerMark:
    """The server a `run --detach --wait-at-most` started (pid and creation time: a reused pid is not it)."""

    pid: int
    create_time: float
    command: list[str] = field(default_factory=list)


@dataclass
class WaitState:
    source: str
    launch_seen_t: float  # when a call first saw this launch (or the server was started)
    last_moved_t: float  # when a call last saw the source grow or the startup move
    calls: int = 0
    file: FileMark | None = None
    server: ServerMark | None = None
    lines: int = 0  # lines of the source seen up to `offset` (or so far, for a stream)
    phase: str | None = None
    progress: float | None = None
    outcome: str | None = None
    recorded: bool = False  # this launch's end is in the history already (a later call must not add it again)
    launch_t: list[Any] | None = None  # [start_line, start_t] of the launch
    phase_t: list[list[Any]] = field(default_factory=list)  # [name, start_line, start_t, end_t] per phase
    version: int = VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> WaitState | None:
        if not isinstance(d, dict) or d.get("version") != VERSION:
            return None
        try:
            file = FileMark(**d["file"]) if d.get("file") else None
            server = ServerMark(**d["server"]) if d.get("server") else None
            known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__ and k not in ("file", "server")}
            return cls(**known, file=file, server=server)
        except (TypeError, KeyError):
            return None


def state_dir() -> Path:
    """BOOTWATCH_HOME/waits when set (as the history store), else XDG_STATE_HOME/bootwatch/waits, else
    ~/.local/state/bootwatch/waits: state, not data (it may be deleted at any time; a call then starts over)."""
    explicit = os.environ.get("BOOTWATCH_HOME")
    if explicit:
        return Path(explicit) / "waits"
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "bootwatch" / "waits"


def source_key(kind: str, text: str, path: str | None) -> str:
    """The same source gives the same key: a file by its real path, anything else by how it was written."""
    if kind == "file" and path is not None:
        with contextlib.suppress(OSError):
            return "file:" + os.path.realpath(path)
    return f"{kind}:{text}"


def default_path(key: str) -> Path:
    return state_dir() / (hashlib.sha256(key.encode()).hexdigest()[:24] + ".json")


def load(path: Path) -> WaitState | None:
    """The state a previous call left, or None (none yet, unreadable or from another version: start over)."""
    try:
        with path.open() as f:
            return WaitState.from_json(json.load(f))
    except (OSError, ValueError):
        return None


def save(path: Path, state: WaitState) -> None:
    """Atomically (a temporary file renamed over it), mode 0600: it names the server's command line."""
    if path.parent == state_dir():
        ensure_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(state.to_json(), f)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


__all__ = ["FileMark", "ServerMark", "WaitState", "default_path", "load", "save", "source_key", "state_dir"]
