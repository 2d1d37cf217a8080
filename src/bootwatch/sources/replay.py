"""Play a recorded log as if the server were starting now, with the log's own pacing.

Delays come from the timestamps in the lines' prefixes, divided by `speed`; lines without a timestamp
follow the previous one at once. `speed=0` plays as fast as the pipeline takes it.
"""

from __future__ import annotations

import asyncio
import io
import os
import stat
from collections.abc import AsyncGenerator, AsyncIterator

from bootwatch.lines.ansi import strip_ansi
from bootwatch.lines.prefixes import parse_prefix
from bootwatch.sources.chunks import READ_SIZE, LineChunker, pieces
from bootwatch.sources.encoding import Utf8Reader
from bootwatch.sources.interrupts import turn

MAX_GAP_S = 3600.0  # a recorded gap longer than this (clock jump, day change) is not replayed in full


async def _fifo_blocks(path: str | os.PathLike[str]) -> AsyncGenerator[bytes, None]:
    """A FIFO's bytes until its writer closes it, read through the event loop: opened once and without
    waiting (O_NONBLOCK), so a stop signal acts while no writer has come (a blocking open would hold the
    loop, and the signal, until one does)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    loop = asyncio.get_running_loop()
    writer_seen = False
    try:
        while True:
            try:
                block = os.read(fd, READ_SIZE)
            except BlockingIOError:  # a writer has it open and wrote nothing yet
                writer_seen = True
                block = None
            if block:
                writer_seen = True
                yield block
                continue
            if block == b"" and writer_seen:
                return  # the writer closed it
            ready = asyncio.Event()  # no data yet, or no writer yet (it reads as closed until one opens it)
            loop.add_reader(fd, ready.set)
            try:
                await ready.wait()
            finally:
                loop.remove_reader(fd)
            writer_seen = True
    finally:
        os.close(fd)


async def _file_blocks(path: str | os.PathLike[str]) -> AsyncGenerator[bytes, None]:
    with open(path, "rb") as f:
        while True:
            block = f.read(READ_SIZE)
            if not block:
                return
            yield block


def is_fifo(path: str | os.PathLike[str]) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


async def replay_chunks(path: str | os.PathLike[str], speed: float, year: int) -> AsyncIterator[bytes]:
    blocks = _fifo_blocks(path) if is_fifo(path) else _file_blocks(path)
    try:
        async for piece in _replayed(blocks, speed, year):
            yield piece
    finally:
        await blocks.aclose()


async def _replayed(blocks: AsyncIterator[bytes], speed: float, year: int) -> AsyncIterator[bytes]:
    chunker = LineChunker()
    last_t: float | None = None
    reader = Utf8Reader(io.BytesIO())  # fed by convert(), never read from
    ended = False
    while not ended:
        raw_block = await anext(blocks, b"")
        ended = not raw_block
        block = reader.convert(raw_block)
        data = chunker.push(block) if block else chunker.flush()
        if not data:
            continue
        if speed <= 0:
            for piece in pieces(data):
                yield piece
                await turn()  # a stop signal acts between pieces
            continue
        pending: list[bytes] = []
        for raw in data.splitlines(keepends=True):
            t = parse_prefix(strip_ansi(raw[:300].decode("utf-8", "replace")).lstrip("\r"), year).t
            if t is not None and last_t is not None and t > last_t:
                if pending:
                    yield b"".join(pending)
                    pending = []
                await asyncio.sleep(min(t - last_t, MAX_GAP_S) / speed)
            if t is not None:
                last_t = t
            pending.append(raw)
        if pending:
            yield b"".join(pending)
