"""How a `serving` event reads in a plain or live view: one short line."""

from __future__ import annotations

from typing import Any

from bootwatch.tracker.events import ServingEvent

PLAIN_EVERY_S = 10.0  # a plain view repeats an unchanged reading this often at most


def describe(d: ServingEvent) -> str:
    parts = []
    if d.gen_tps is not None:
        parts.append(f"{d.gen_tps:.1f} tok/s")
    if d.running is not None:
        parts.append(f"{d.running} running")
    if d.queued is not None:
        parts.append(f"{d.queued} queued")
    if d.kv_usage is not None:
        parts.append(f"KV {d.kv_usage:.0%}")
    if d.accept_len is not None:
        parts.append(f"accept len {d.accept_len:.2f}")
    elif d.accept_rate is not None:
        parts.append(f"accept rate {d.accept_rate:.0%}")
    if d.preemptions:
        parts.append(f"{d.preemptions} preempted")
    where = f"line {d.line_no}" if d.line_no is not None else d.source
    return ", ".join(parts) + (f"  ({where})" if where else "")


class PlainThrottle:
    """A plain view prints a reading when the load changed, or every PLAIN_EVERY_S: not one line a second
    for an idle server."""

    def __init__(self) -> None:
        self._last: tuple[float, tuple[Any, ...]] | None = None

    def due(self, now: float, d: ServingEvent) -> bool:
        key = (d.running, d.queued, d.preemptions)
        if self._last is not None and self._last[1] == key and now - self._last[0] < PLAIN_EVERY_S:
            return False
        self._last = (now, key)
        return True
