"""The signals that ask bootwatch to stop, handled in one place for the whole of a live command.

SIGINT (Ctrl-C), SIGTERM (a supervisor, `kill`), SIGHUP (the terminal was closed) and SIGQUIT (Ctrl-\\) all
mean the same: stop what we started and leave, exiting 128 + the first signal's number. Each further
signal asks the stop under way to skip to its next, harsher step (SIGINT, SIGTERM, SIGKILL of the group):
a second Ctrl-C does not wait out the grace of the first.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


class Interrupts:
    """Installed on the running loop once, for as long as the loop lives (closing the loop removes it)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.loop = loop
        self.signum: int | None = None  # the first stop signal received
        self.count = 0  # how many have been received
        self.fired = asyncio.Event()
        self._next = asyncio.Event()

    def request(self, signum: int) -> None:
        self.count += 1
        if self.signum is None:
            self.signum = signum
            self.fired.set()
        # Everyone waiting for "the next one" wakes; later waiters wait for the one after.
        current, self._next = self._next, asyncio.Event()
        current.set()

    def next_request(self) -> asyncio.Event:
        """Set when the next stop signal arrives (a stop in progress skips to its next step)."""
        return self._next

    @property
    def exit_code(self) -> int:
        return 128 + (self.signum or signal.SIGINT)


_installed: dict[int, Interrupts] = {}
_early: list[int] = []  # stop signals that came before the loop's handlers were in place


def catch_early() -> None:
    """Before the event loop runs: a stop signal is kept for the loop's Interrupts instead of raising
    KeyboardInterrupt (asyncio.run's own SIGINT handling would cancel the command mid-way, after it may have
    started a server, and skip its summary and history)."""
    for sig in STOP_SIGNALS:
        with contextlib.suppress(ValueError, OSError):  # not the main thread: signals stay as they were
            signal.signal(sig, lambda signum, _frame: _early.append(signum))


def stop_requested() -> int | None:
    """The first stop signal caught so far, or None: for work that runs without yielding to the loop (a
    catch-up on a long file, `report`), which checks it between blocks and stops there."""
    if _early:
        return _early[0]
    for found in _installed.values():
        if found.signum is not None:
            return found.signum
    return None


async def turn() -> None:
    """A reader's pause between two pieces: the loop runs its callbacks (a stop signal's handler among them).
    Once a stop is pending the reader waits instead of taking the CPU from the stop (it is cancelled soon)."""
    await asyncio.sleep(0 if stop_requested() is None else 0.05)


@contextlib.contextmanager
def caught_while_busy() -> Iterator[None]:
    """Around work that runs without yielding to the loop (a catch-up): the loop's handlers only act when
    the loop runs, so a stop signal is kept where `stop_requested` sees it at once, then handed to the
    running loop's Interrupts."""
    previous: dict[int, Any] = {}
    for sig in STOP_SIGNALS:
        with contextlib.suppress(ValueError, OSError):  # not the main thread: nothing to do
            previous[sig] = signal.signal(sig, lambda signum, _frame: _early.append(signum))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(signum, handler)
        with contextlib.suppress(RuntimeError):
            loop = asyncio.get_running_loop()
            found = _installed.get(id(loop))
            if found is not None and found.loop is loop:
                while _early:
                    found.request(_early.pop(0))


def interrupts() -> Interrupts:
    """The running loop's Interrupts, installing its signal handlers on first use."""
    loop = asyncio.get_running_loop()
    key = id(loop)
    found = _installed.get(key)
    if found is not None and found.loop is loop:  # an id can be reused by a later loop
        return found
    found = Interrupts(loop)
    for sig in STOP_SIGNALS:
        with contextlib.suppress(ValueError, RuntimeError):  # not the main thread: signals stay as they were
            loop.add_signal_handler(sig, found.request, sig)
    _installed[key] = found
    while _early:
        found.request(_early.pop(0))
    return found


def retire() -> None:
    """Take the running loop's handlers off before the loop closes, and catch later stop signals as before it ran.

    asyncio's loop.close() closes its wakeup pipe before it removes its signal handlers: a signal in between is
    written to a closed descriptor, and Python prints "Exception ignored when trying to write to the signal
    wakeup fd" with a traceback on stderr. Removing the handlers first (the last one removed unsets the wakeup
    fd) closes that window; the command has decided its exit code by then, so a late signal is only kept."""
    loop = asyncio.get_running_loop()
    found = _installed.pop(id(loop), None)
    if found is None or found.loop is not loop:
        return
    for sig in STOP_SIGNALS:
        with contextlib.suppress(ValueError, RuntimeError):
            loop.remove_signal_handler(sig)
    catch_early()


async def retiring(command: Awaitable[T]) -> T:
    """`command`, then `retire()`: what `asyncio.run` runs for a live command."""
    try:
        return await command
    finally:
        retire()
