"""The tracker: one state machine per launch; lines in, typed events out; no I/O."""

from bootwatch.tracker.events import Event
from bootwatch.tracker.tracker import Tracker

__all__ = ["Event", "Tracker"]
