from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Line:
    """One message of the log, as every later stage sees it.

    `no` counts physical lines from 1 (split on \\n only); several `Line`s share a number when a
    physical line held \\r-separated progress updates or a message glued onto a progress bar.
    """

    no: int
    text: str  # the message, prefix removed
    raw: str  # the whole segment, ANSI removed
    t: float | None = None  # unix time from the line's own prefix, if it has one
    level: str | None = None  # INFO / WARNING / ERROR ... when the prefix names it
    proc: str | None = None  # process or rank tag: "TP1", "EngineCore_DP0", "Worker_TP1", "rank1"
    fmt: str | None = None  # which prefix family matched (lines/formats.toml): sglang, vllm, rust_tracing, ...
    update: bool = False  # an intermediate \\r progress state, superseded within the same line
    log_t: float | None = None  # the prefix's time even where `t` is the arrival time (a live analyzer)
    target: str | None = None  # Rust tracing's target ("mistralrs_core::engine"): its crate is the program's
