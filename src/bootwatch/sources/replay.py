"""Play a recorded log as if the server were starting now, with the log's own pacing.

Delays come from the timestamps in the lines' prefixes, divided by `speed`; lines without a timestamp
follow the previous one at once. `speed=0` plays as fast as the pipeline takes it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

from bootwatch.lines.ansi import strip_ansi
from bootwatch.lines.prefixes import parse_prefix
from bootwatch.sources.chunks import READ_SIZE, LineChunker
from bootwatch.sources.encoding import Utf8Reader

MAX_GAP_S = 3600.0  # a recorded gap longer than this (clock jump, day change) is not replayed in full


async def replay_chunks(path: str | os.PathLike[str], speed: float, year: int) -> AsyncIterator[bytes]:
    chunker = LineChunker()
    last_t: float | None = None
    with open(path, "rb") as raw_file:
        f = Utf8Reader(raw_file)
        while True:
            block = f.read(READ_SIZE)
            data = chunker.push(block) if block else chunker.flush()
            if data:
                if speed <= 0:
                    yield data
                    await asyncio.sleep(0)
                else:
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
            if not block:
                return
