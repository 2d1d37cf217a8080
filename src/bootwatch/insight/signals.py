"""Moved to bootwatch.vocab.activity (a leaf, so that the tracker can read it without importing insight);
kept for a short time for imports not yet moved."""

from bootwatch.vocab.activity import BUSY_CORES, CHECKED, READING_BPS, Activity, fmt_bytes

__all__ = ["BUSY_CORES", "CHECKED", "READING_BPS", "Activity", "fmt_bytes"]
