"""Level names as the tracker reads them, whatever a log wrote: one table for text prefixes and JSON records,
so that a FATAL means the same from either (the tracker gives FATAL lines a meaning of their own)."""

from __future__ import annotations

LEVELS = {
    "I": "INFO",
    "W": "WARNING",
    "E": "ERROR",
    "F": "FATAL",
    "D": "DEBUG",
    "V": "DEBUG",
    "WARN": "WARNING",
    "ERR": "ERROR",
    "TRACE": "DEBUG",
    "CRITICAL": "CRITICAL",
    "FATAL": "FATAL",
}


def level_name(level: str | None) -> str | None:
    return LEVELS.get(level, level) if level is not None else None
