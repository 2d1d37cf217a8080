"""The source schemes: which module parses and opens each kind of SOURCE (promtail's stage registry).

A new source is one module that defines `parse_spec(text) -> Spec` and `open_source(spec, options) -> Source`
(sources/protocol.py: `OpenOptions`, `Source`), plus one line in SCHEMES. A local file has no module here:
bootwatch/opening.py opens it, since it catches up through the Analyzer, a layer above the sources. Modules are
imported only when their scheme is used: the CLI's start-up does not pay for docker's or journald's code to watch
a file.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from bootwatch.sources.protocol import OpenOptions, Source
from bootwatch.sources.spec import Spec, parse_unprefixed


@dataclass(frozen=True)
class Scheme:
    kinds: tuple[str, ...]  # the Spec kinds its module parses and opens
    prefixes: tuple[str, ...]  # what a SOURCE starts with to be one of them (none: no prefix)
    module: str | None  # None: opened by bootwatch/opening.py (a local file), parsed as an unprefixed SOURCE
    forms: str  # how `watch --help` writes it


SCHEMES = (
    Scheme(("file",), (), None, "a local file"),
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


Parse = Callable[[str], Spec]
Open = Callable[[Spec, OpenOptions], Source]


def _hook(scheme: Scheme, name: str) -> object:
    assert scheme.module is not None
    return getattr(importlib.import_module(scheme.module), name)


def parse_source(text: str) -> Spec:
    for scheme in SCHEMES:
        if scheme.prefixes and any(text.startswith(p) for p in scheme.prefixes):
            return cast(Parse, _hook(scheme, "parse_spec"))(text)
    return parse_unprefixed(text)


def opener(spec: Spec) -> Open:
    """The scheme module's `open_source` for a non-file Spec."""
    for scheme in SCHEMES:
        if spec.kind in scheme.kinds and scheme.module is not None:
            return cast(Open, _hook(scheme, "open_source"))
    raise ValueError(f"no source scheme opens {spec.kind!r}")  # a Spec no scheme parsed: a bug


__all__ = ["SCHEMES", "Scheme", "opener", "parse_source"]
