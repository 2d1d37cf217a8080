"""How a `serving` event reads in a plain or live view: one short line."""

from __future__ import annotations

from typing import Any

PLAIN_EVERY_S = 10.0  # a plain view repeats an unchanged reading this often at most


def describe(d: dict[str, Any]) -> str:
    parts = []
    if d.get("gen_tps") is not None:
        parts.append(f"{d['gen_tps']:.1f} tok/s")
    if d.get("running") is not None:
        parts.append(f"{d['running']} running")
    if d.get("queued") is not None:
        parts.append(f"{d['queued']} queued")
    if d.get("kv_usage") is not None:
        parts.append(f"KV {d['kv_usage']:.0%}")
    if d.get("accept_len") is not None:
        parts.append(f"accept len {d['accept_len']:.2f}")
    elif d.get("accept_rate") is not None:
        parts.append(f"accept rate {d['accept_rate']:.0%}")
    if d.get("preemptions"):
        parts.append(f"{d['preemptions']} preempted")
    where = f"line {d['line_no']}" if d.get("line_no") is not None else str(d.get("source", ""))
    return ", ".join(parts) + (f"  ({where})" if where else "")


class PlainThrottle:
    """A plain view prints a reading when the load changed, or every PLAIN_EVERY_S: not one line a second
    for an idle server."""

    def __init__(self) -> None:
        self._last: tuple[float, tuple[Any, ...]] | None = None

    def due(self, now: float, d: dict[str, Any]) -> bool:
        key = (d.get("running"), d.get("queued"), d.get("preemptions"))
        if self._last is not None and self._last[1] == key and now - self._last[0] < PLAIN_EVERY_S:
            return False
        self._last = (now, key)
        return True
