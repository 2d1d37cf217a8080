"""Sinks: render events and summaries for people (rich), scripts (plain lines) and programs (JSON)."""
