"""Probes: signals that are not the log (HTTP health, the process tree)."""
