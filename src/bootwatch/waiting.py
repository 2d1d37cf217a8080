"""Waiting for an event with a timeout, without losing a cancellation.

`asyncio.wait_for` on Python 3.11 can swallow a cancellation that arrives as the awaited thing completes
(gh-86296): a reader task cancelled at that moment runs on, and whoever awaits its end waits forever.
`asyncio.wait` has no such race.
"""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """True if `event` is set within `timeout` seconds."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=timeout)
    finally:
        waiter.cancel()
    return event.is_set()
