"""A source played from a script, in process: bytes as they would arrive, pauses, a death, then silence.

It plays the part httpx's MockTransport plays for HTTP clients: the live session (timers, settling, the verdict
machine) runs for real, but what the server "writes" and when is the test's to say, with no subprocess or file.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

from bootwatch.sources.chunks import LineChunker
from bootwatch.sources.container_state import Death


@dataclass(frozen=True)
class Pause:
    seconds: float


@dataclass(frozen=True)
class Dies:
    """The source reports the server gone (as a container exit does)."""

    code: int | None = None
    signal: int | None = None
    reason: str = "the server exited"


Step = bytes | Pause | Dies


class ScriptedSource:
    def __init__(self, steps: Iterable[Step], hold_open: bool = True) -> None:
        self._steps = list(steps)
        self.hold_open = hold_open  # a watched file stays open after its last line; a replay ends
        self.offset = 0
        self._death: Death | None = None
        self.played = asyncio.Event()

    @property
    def bytes_read(self) -> int:
        return self.offset

    def death(self) -> Death | None:
        return self._death

    async def aclose(self) -> None:
        return None

    async def chunks(self) -> AsyncIterator[bytes]:
        chunker = LineChunker()
        for step in self._steps:
            if isinstance(step, Pause):
                await asyncio.sleep(step.seconds)
                continue
            if isinstance(step, Dies):
                self._death = Death(step.code, step.signal, step.reason)
                continue
            data = chunker.push(step)
            if data:
                self.offset += len(data)
                yield data
        tail = chunker.flush() if not self.hold_open else b""
        if tail:
            self.offset += len(tail)
            yield tail
        self.played.set()
        if self.hold_open:
            await asyncio.Event().wait()  # like a quiet file: nothing more, ever
