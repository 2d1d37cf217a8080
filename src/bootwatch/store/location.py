"""Where the history store lives, and making its directory and file private whatever the umask."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path

DB_NAME = "history.sqlite3"
LEGACY_NAME = "history.jsonl"  # the store before SQLite: one JSON line per startup
LOCK_NAME = "history.lock"


def home() -> Path:
    """BOOTWATCH_HOME, else XDG_DATA_HOME/bootwatch, else ~/.local/share/bootwatch."""
    explicit = os.environ.get("BOOTWATCH_HOME")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")) / "bootwatch"


def ensure_dir(base: Path) -> None:
    """Create `base` (and any missing parent) as 0700. Modes are set explicitly, not left to the umask: under
    a umask of 0 a plain mkdir would make the directory world-writable."""
    missing: list[Path] = []
    p = base
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another bootwatch made it a moment ago
            os.mkdir(d, 0o700)
            os.chmod(d, 0o700)
    if not base.is_dir():
        raise NotADirectoryError(f"{base} is not a directory")
    if not os.environ.get("BOOTWATCH_HOME") and not missing:
        # The default directory is ours by name: an older bootwatch made it 0755.
        tighten(base, 0o700)


def tighten(path: Path, mode: int) -> None:
    """chmod `path` to `mode` if it is ours and not so already; best effort."""
    with contextlib.suppress(OSError):
        st = path.stat()
        if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) != mode:
            os.chmod(path, mode)


def private_file(path: Path) -> bool:
    """Make sure `path` is a regular file of mode 0600 before SQLite opens it: SQLite would create it 0644
    (less the umask) and gives its -wal and -shm files the mode of the database. Returns False when
    something other than a regular file is in its place."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            return False
        tighten(path, 0o600)
        return True
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    return True


def is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return True  # nothing there yet is no obstacle


@contextlib.contextmanager
def exclusive(base: Path) -> Iterator[None]:
    """A lock over the store's files for what SQLite's own locks cannot cover: renaming the database."""
    fd = os.open(base / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


__all__ = ["DB_NAME", "LEGACY_NAME", "ensure_dir", "exclusive", "home", "is_regular", "private_file", "tighten"]
