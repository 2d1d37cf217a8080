"""Waiting, from a plain thread, for a coroutine that may be stopping a server: never abandoned half-way.

The synchronous API runs its event loop in a thread of its own and waits for it in the caller's thread. A
Ctrl-C there is a KeyboardInterrupt in the wait. Giving up the wait then (as `concurrent.futures` does once
its future is cancelled) lets the loop thread be closed under a stop in progress, which releases the guard
with the server's children still running. Here each KeyboardInterrupt cancels the coroutine's task once
more (the stop under way takes that as "skip to the next, harsher step", see `Group.stop`), and the wait
ends only when the coroutine has ended; then the first interrupt is raised.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_to_the_end(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on `loop` (running in another thread) and wait until it has ended, whatever interrupts us."""
    ended = threading.Event()
    outcome: dict[str, Any] = {}
    tasks: list[asyncio.Task[None]] = []

    async def runner() -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.append(task)
        try:
            outcome["result"] = await coro
        except BaseException as e:  # handed to the waiting thread, raised there
            outcome["error"] = e
        finally:
            ended.set()

    def cancel() -> None:
        for task in tasks:
            task.cancel()

    asyncio.run_coroutine_threadsafe(runner(), loop)
    interrupted: BaseException | None = None
    while not ended.is_set():
        try:
            ended.wait()
        except BaseException as e:  # KeyboardInterrupt (or SystemExit from a signal handler): cancel again
            interrupted = interrupted or e
            loop.call_soon_threadsafe(cancel)
    if interrupted is not None:
        raise interrupted
    if "error" in outcome:
        raise outcome["error"]
    result: T = outcome["result"]
    return result
