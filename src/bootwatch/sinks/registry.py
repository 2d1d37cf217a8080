"""The sinks the commands can build: the user's own view (JSON lines, the live view, plain lines) and the
extra ones an option asks for (--metrics-port, --state).

A new extra sink is one module with a factory `(Output, source, tracker) -> Sink | None` (None when its
option is not set) plus one line in EXTRAS, and its option in cli.py. Modules are imported only when used:
prometheus_client is not loaded to watch a file.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from bootwatch.errors import UsageError
from bootwatch.sinks.protocol import Sink

if TYPE_CHECKING:
    from bootwatch.tracker.tracker import Tracker


@dataclass(frozen=True)
class Output:
    """How a live command reports: validated once, from the CLI's options."""

    json: bool = False
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    state: Path | None = None

    def __post_init__(self) -> None:
        if self.state is not None and not self.state.parent.is_dir():
            raise UsageError(f"--state {self.state}: the directory {self.state.parent} does not exist")


Factory = Callable[[Output, str, "Tracker | None"], Sink | None]

EXTRAS: tuple[str, ...] = (  # "module:factory"
    "bootwatch.sinks.registry:metrics_sink",
    "bootwatch.sinks.registry:state_sink",
)


def metrics_sink(out: Output, source: str, tracker: Tracker | None) -> Sink | None:
    if out.metrics_port is None:
        return None
    from bootwatch.sinks.metrics import MetricsSink  # prometheus_client only when asked for

    metrics = MetricsSink(tracker=tracker)
    metrics.serve(out.metrics_port, out.metrics_host)
    return metrics


def state_sink(out: Output, source: str, tracker: Tracker | None) -> Sink | None:
    if out.state is None:
        return None
    from bootwatch.probe_state import StateSink

    return StateSink(out.state, source)


def user_sink(out: Output, names: Sequence[str], source: str) -> Sink:
    if out.json:
        from bootwatch.sinks.events import JsonSink

        return JsonSink()
    if sys.stdout.isatty():
        from rich.console import Console

        from bootwatch.sinks.live_view import LiveSink

        console = Console(highlight=False)
        if LiveSink.fits(console):  # a terminal too small for the view gets the plain lines
            return LiveSink(list(names), source, console)
    from bootwatch.sinks.events import PlainSink

    return PlainSink(source=source)


def make_sink(out: Output, names: Sequence[str], source: str, tracker: Tracker | None = None) -> Sink:
    """The user's sink, with every extra sink its options ask for. `tracker`: the one startup's, if one."""
    return with_extras(user_sink(out, names, source), out, source, tracker)


def with_extras(main: Sink, out: Output, source: str, tracker: Tracker | None = None) -> Sink:
    """`main`, or a FanOut of it and the extra sinks the options ask for."""
    extra: list[Sink] = []
    for ref in EXTRAS:
        module, name = ref.split(":")
        made = cast(Factory, getattr(importlib.import_module(module), name))(out, source, tracker)
        if made is not None:
            extra.append(made)
    if not extra:
        return main
    from bootwatch.sinks.fanout import FanOut

    return FanOut(main, *extra)


__all__ = ["EXTRAS", "Output", "make_sink", "with_extras"]
