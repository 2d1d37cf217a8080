"""The source schemes: which module parses and opens each kind of SOURCE (promtail's stage registry).

A new source is one module that defines `parse_spec(text) -> Spec` and `open_source(spec, opening) -> Source`
(sources/protocol.py), plus one line in SCHEMES. Modules are imported only when their scheme is used: the
CLI's start-up does not pay for docker's or journald's code to watch a file.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from bootwatch.sources.spec import Spec, parse_unprefixed

if TYPE_CHECKING:
    from bootwatch.pipeline import Analyzer
    from bootwatch.sinks.protocol import Sink
    from bootwatch.sources.protocol import Source


@dataclass(frozen=True)
class Scheme:
    kinds: tuple[str, ...]  # the Spec kinds its module parses and opens
    prefixes: tuple[str, ...]  # what a SOURCE starts with to be one of them (none: no prefix)
    module: str
    forms: str  # how `watch --help` writes it


SCHEMES = (
    Scheme(("file",), (), "bootwatch.sources.local", "a local file"),
    Scheme(
        ("ssh",),
        ("ssh://",),
        "bootwatch.sources.ssh",
        "ssh://[user@]host[:port]/path or [user@]host:/path (through the system ssh client)",
    ),
    Scheme(
        ("docker", "k8s"),
        ("docker://", "k8s://"),
        "bootwatch.sources.container",
        "docker://CONTAINER, k8s://[namespace/]pod[/container]",
    ),
    Scheme(("journald",), ("journald://",), "bootwatch.sources.journald", "journald://[namespace/]UNIT (journalctl)"),
)


def forms() -> str:
    """The SOURCE forms, for the help text."""
    return ", ".join(s.forms for s in SCHEMES[:-1]) + " or " + SCHEMES[-1].forms


@dataclass
class Opening:
    """What an opener may use: the analyzer (a file catches up on what it already holds), the sink (notes,
    the events of the launch so far), and the watch's options. `await_new` is the opener's to set: the file's
    last launch had already ended, so only a new one is judged."""

    analyzer: Analyzer
    sink: Sink
    from_start: bool = False
    rules: tuple[str, ...] = ()
    attach_ready: bool = False  # a last launch already ready is the server as it stands, not one already over
    await_new: bool = field(default=False)

    def note(self, text: str) -> None:
        self.sink.note(time.time(), text)


Parse = Callable[[str], Spec]
Open = Callable[[Spec, Opening], "Source"]


def _hook(scheme: Scheme, name: str) -> object:
    return getattr(importlib.import_module(scheme.module), name)


def parse_source(text: str) -> Spec:
    for scheme in SCHEMES:
        if any(text.startswith(p) for p in scheme.prefixes):
            return cast(Parse, _hook(scheme, "parse_spec"))(text)
    return parse_unprefixed(text)


def open_source(spec: Spec, opening: Opening) -> Source:
    for scheme in SCHEMES:
        if spec.kind in scheme.kinds:
            return cast(Open, _hook(scheme, "open_source"))(spec, opening)
    raise ValueError(f"no source scheme opens {spec.kind!r}")  # a Spec no scheme parsed: a bug


__all__ = ["SCHEMES", "Opening", "Scheme", "open_source", "parse_source"]
