"""Text that came from a log, made safe to show: secrets masked (redact), controls escaped (safe)."""

from __future__ import annotations

from bootwatch.text.redact import redact
from bootwatch.text.safe import printable


def shown(s: object) -> str:
    """What a terminal or a plain line may show of a log's text: secrets masked, controls escaped."""
    return printable(redact(s if isinstance(s, str) else str(s)))


__all__ = ["printable", "redact", "shown"]
