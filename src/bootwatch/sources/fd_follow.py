"""Follow a file that is already open, as it grows: the log `run` handed its server.

Whatever happens at the path (logrotate renames the file and creates a new one, someone deletes it), the
server keeps writing to the file it was given, and so this reads that same file, never reopening anything
by path. inotify on the open file (through /proc/self/fd, so on the inode, not on the name) wakes the
reader within milliseconds; a periodic fstat is the truth where no event arrives. Only complete lines are
handed on, as FileFollower does, until `end_of_input()` says the server is gone: then its last line, newline
or not, is handed on too and the stream ends. A copytruncate (the file cut to zero in place) starts over at
its start.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

from bootwatch.sources.chunks import READ_SIZE, LineChunker, pieces
from bootwatch.sources.container_state import Death
from bootwatch.sources.interrupts import turn
from bootwatch.waiting import wait_event

POLL_S = 1.0  # the fstat poll when no inotify event arrives


class FdFollower:
    """`chunks()` yields complete-line chunks read from `fd` from `start` on; `offset` is how far it read.
    The descriptor stays the caller's: close() stops following, it does not close `fd`."""

    def __init__(self, fd: int, start: int = 0, poll_s: float = POLL_S, events: bool = True) -> None:
        self.fd = fd
        self.offset = start
        self.poll_s = poll_s
        self.events = events
        self.truncations = 0
        self._wake = asyncio.Event()
        self._ended = False  # the writer is gone: read to the end, hand on the partial last line, stop
        self._watch_task: asyncio.Task[None] | None = None

    def _start_watch(self) -> None:
        """The watch is in place before the first read: a write between that read and a later watch would
        otherwise wait for the fstat poll (a server that prints everything and exits at once)."""
        if self._watch_task is not None or not self.events:
            return
        from asyncinotify import Inotify, Mask

        try:
            inotify = Inotify()
            inotify.add_watch(f"/proc/self/fd/{self.fd}", Mask.MODIFY | Mask.ATTRIB | Mask.CLOSE_WRITE)
        except OSError:  # no inotify (limits): the poll runs
            return
        self._watch_task = asyncio.create_task(self._watch(inotify))

    async def _watch(self, inotify: Any) -> None:
        with contextlib.suppress(OSError), inotify:
            async for _ in inotify:
                self._wake.set()

    async def _wait(self) -> None:
        await wait_event(self._wake, self.poll_s)
        self._wake.clear()

    def end_of_input(self) -> None:
        self._ended = True
        self._wake.set()

    def close(self) -> None:
        if self._watch_task is not None:
            self._watch_task.cancel()
            self._watch_task = None

    # ---- the Source protocol (sources/protocol.py) ----------------------------------------------------
    @property
    def bytes_read(self) -> int:
        return self.offset

    def death(self) -> Death | None:
        return None  # the server's own exit is the session's to see (it started the process)

    async def aclose(self) -> None:
        self.close()

    async def chunks(self) -> AsyncIterator[bytes]:
        """Complete lines, as they arrive, forever (the caller stops iterating)."""
        chunker = LineChunker()
        self._start_watch()
        try:
            while True:
                got = False
                while True:
                    block = os.pread(self.fd, READ_SIZE, self.offset)
                    if not block:
                        break
                    got = True
                    self.offset += len(block)
                    for piece in pieces(chunker.push(block)):
                        yield piece
                        await turn()  # a stop signal acts between pieces, however fast the log grows
                    if updates := chunker.updates():  # a progress bar's redraws, as they come
                        yield updates
                if os.fstat(self.fd).st_size < self.offset:
                    # Truncated in place (copytruncate): the server's appends start again at 0.
                    chunker = LineChunker()
                    self.offset = 0
                    self.truncations += 1
                    continue
                if not got:
                    if self._ended:
                        tail = chunker.flush()  # it will never get its newline: analysed as it stands
                        if tail:
                            yield tail
                        return
                    if state := chunker.current():  # a progress bar's state while it waits for its next redraw
                        yield state
                    await self._wait()
        finally:
            self.close()
