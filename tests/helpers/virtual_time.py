"""An asyncio loop whose clock is virtual: when nothing is ready to run, it jumps straight to the next timer
instead of waiting for it (trio's autojump clock). A live session's timers (settle grace, stall, timeout, the
child check, the probe's pace) and a scripted source's pauses then pass at once, in the order and at the
intervals they would for real, and the same test gives the same answer on a busy machine.

Only for code whose waits are asyncio timers: real I/O the loop does not see (a thread, a subprocess) would
find the clock far ahead of it. The selector is still polled (without waiting), so callbacks from threads and
ready sockets are taken as they come.

    loop_clock = VirtualClock()
    result = loop_clock.run(coro())                  # like asyncio.run
    Session(..., clock=loop_clock.time)              # the session's wall clock reads the same virtual time
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
EPOCH = 1_750_000_000.0  # virtual wall time at loop time 0 (a plausible 2025 date: the analysis reads stamps)


class _JumpingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    def __init__(self, loop: VirtualTimeLoop) -> None:
        super().__init__()
        self._vloop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = super().select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            # No timer at all: only another thread or a real fd can wake the loop; wait for it for real.
            return super().select(None)
        self._vloop.advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._now = 0.0
        super().__init__(_JumpingSelector(self))

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += max(0.0, seconds)


class VirtualClock:
    """One virtual-time loop and the wall clock that goes with it."""

    def __init__(self, epoch: float = EPOCH) -> None:
        self.epoch = epoch
        self.loop: VirtualTimeLoop | None = None

    def time(self) -> float:
        """The virtual wall clock (time.time()'s stand-in): the epoch plus the loop's time."""
        return self.epoch + (self.loop.time() if self.loop is not None else 0.0)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        with asyncio.Runner(loop_factory=self._new_loop) as runner:
            return runner.run(coro)

    def _new_loop(self) -> VirtualTimeLoop:
        self.loop = VirtualTimeLoop()
        return self.loop


def run_virtual(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run on a virtual clock (for code that reads no wall clock of its own)."""
    return VirtualClock().run(coro)
