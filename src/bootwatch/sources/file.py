"""Follow a log file like `tail -F`: it may not exist yet, may be truncated, rotated or replaced.

New data is noticed through inotify (asyncinotify) and, as a fallback where events do not arrive (NFS,
some container mounts), by a stat poll. Only complete lines are handed on; a partial last line waits
for its newline. Offsets are kept per file identity so that nothing is lost or read twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bootwatch.sources.chunks import READ_SIZE, LineChunker
from bootwatch.waiting import wait_event

POLL_S = 1.0  # fallback stat poll when no file event arrives


class FileFollower:
    def __init__(self, path: str | os.PathLike[str], start: int = 0, poll_s: float = POLL_S,
                 events: bool = True) -> None:
        self.path = Path(path)
        self.start = start
        self.poll_s = poll_s
        self.events = events
        self._wake = asyncio.Event()
        self._watch_task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self.offset = 0
        self.rotations = 0
        self.truncations = 0

    async def _watch(self) -> None:
        """inotify on the file's directory (the file may not exist yet, or be replaced): no wake-up at all
        while nothing is written, a few milliseconds when something is."""
        from asyncinotify import Inotify, Mask

        directory = self.path.parent if self.path.parent.exists() else Path(".")
        mask = (Mask.MODIFY | Mask.CREATE | Mask.MOVED_TO | Mask.MOVED_FROM | Mask.DELETE | Mask.CLOSE_WRITE
                | Mask.ATTRIB)
        with contextlib.suppress(OSError), Inotify() as inotify:  # no inotify (NFS, limits): the poll runs
            inotify.add_watch(directory, mask)
            async for event in inotify:
                if event.name is None or event.name.name == self.path.name:
                    self._wake.set()

    async def _wait(self) -> None:
        if self._watch_task is None and self.events:
            self._watch_task = asyncio.create_task(self._watch())
        await wait_event(self._wake, self.poll_s)
        self._wake.clear()

    def close(self) -> None:
        self._stop.set()
        if self._watch_task is not None:
            self._watch_task.cancel()

    async def chunks(self) -> AsyncIterator[bytes]:
        """Complete lines, as they arrive, forever (the caller stops iterating)."""
        fd: int | None = None
        ident: tuple[int, int] | None = None
        chunker = LineChunker()
        try:
            while True:
                if fd is None:
                    try:
                        fd = os.open(self.path, os.O_RDONLY)
                    except FileNotFoundError:
                        await self._wait()
                        continue
                    except OSError as e:
                        from bootwatch.errors import UsageError

                        raise UsageError(f"{self.path}: cannot open: {e.strerror}") from None
                    st = os.fstat(fd)
                    ident = (st.st_dev, st.st_ino)
                    self.offset = self.start if self.start <= st.st_size else 0
                    self.start = 0  # only the first file opened starts late
                    os.lseek(fd, self.offset, os.SEEK_SET)
                got = False
                while True:
                    block = os.read(fd, READ_SIZE)
                    if not block:
                        break
                    got = True
                    self.offset += len(block)
                    out = chunker.push(block)
                    if out:
                        yield out
                # What is at the path now: the same file, a truncated one, or a new one?
                try:
                    st = os.stat(self.path)
                except FileNotFoundError:
                    st = None
                if st is not None and (st.st_dev, st.st_ino) != ident:
                    # Rotated or replaced: the old file has been read to its end; its last line is complete.
                    tail = chunker.flush()
                    if tail:
                        yield tail
                    os.close(fd)
                    fd, ident = None, None
                    self.rotations += 1
                    continue
                if st is not None and st.st_size < self.offset:
                    # Truncated in place (copytruncate): start over at the beginning.
                    chunker = LineChunker()
                    os.lseek(fd, 0, os.SEEK_SET)
                    self.offset = 0
                    self.truncations += 1
                    continue
                if not got:
                    await self._wait()
        finally:
            if fd is not None:
                os.close(fd)
            self.close()


def launch_starts(path: str | os.PathLike[str], marker: Any, keep: int = 2, window: int = 1 << 22) -> list[int]:
    """Line-start offsets of the last `keep` launch markers in the file, earliest first.

    Reads backwards in blocks, so the cost grows with the distance from the end to those markers, not with
    the size of the file.
    """
    size = os.path.getsize(path)
    found: set[int] = set()
    with open(path, "rb") as f:
        end = size
        while end > 0 and len(found) < keep:
            begin = max(0, end - window)
            f.seek(begin)
            block = f.read(end - begin + 4096)  # overlap so that a marker cut by the block edge is seen
            for m in marker.finditer(block):
                if begin + m.start() < end:
                    found.add(begin + block.rfind(b"\n", 0, m.start()) + 1)
            end = begin
    return sorted(found)[-keep:]


def last_launch_offset(path: str | os.PathLike[str], marker: Any) -> int:
    """Byte offset where the last launch in the file starts (0 if none is marked). Two markers close together
    (vLLM's banner and its engine line) belong to one launch: the earlier one is taken."""
    starts = launch_starts(path, marker, keep=2)
    if not starts:
        return 0
    if len(starts) == 2 and starts[1] - starts[0] < (256 << 10):
        return starts[0]
    return starts[-1]
