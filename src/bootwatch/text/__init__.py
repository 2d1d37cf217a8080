"""Text that came from a log, made safe to show: secrets masked (redact), controls escaped (safe)."""
