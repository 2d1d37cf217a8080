"""The state of one launch: phases, facts, warnings, evidence, verdict."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from bootwatch.engines.rules import EngineRules, Rule
from bootwatch.lines import Line
from bootwatch.tracker.candidates import Candidate
from bootwatch.tracker.parts import Failure, Ready
from bootwatch.tracker.phases import Phase


@dataclass
class Launch:
    engine: str
    rules: EngineRules
    start_line: int
    start_t: float | None
    forced_engine: bool = False
    scores: dict[str, int] = field(default_factory=dict)  # engine -> weight of its evidence so far
    detect_hits: dict[str, int] = field(default_factory=dict)  # detect rule or prefix family -> times it counted
    ready_engine: str | None = None  # the engine whose rules said ready
    engine_by_banner: bool = False  # the launch began at its engine's own launch line
    first_only_seen: bool = False  # a first_only launch marker was seen (later ones are reloads)
    # A server that loads models on demand after it is up (Ollama: a runner per model): how many loads were ready,
    # the last one's ready line, and whether a load began that has not said ready yet
    loads: int = 0
    last_load: Ready | None = None
    load_pending: bool = False
    # Lines some engine's rules call evidence of failure, kept to judge them again if the engine turns out
    # to be another one than it seemed when they were read.
    evidence_lines: deque[tuple[Line, list[Rule]]] = field(default_factory=lambda: deque(maxlen=200))
    markers: set[str] = field(default_factory=set)  # launch rules seen (a second one = new launch)
    phases: list[Phase] = field(default_factory=list)
    begun: dict[tuple[str | None, str], int] = field(default_factory=dict)  # (proc, rule) -> count
    flags: set[str] = field(default_factory=set)
    facts: dict[str, Any] = field(default_factory=dict)
    fact_lines: dict[str, int] = field(default_factory=dict)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    warned: set[str] = field(default_factory=set)
    ready: Ready | None = None  # what the log says; the verdict machine decides whether it is readiness
    server_ready: Ready | None = None  # a model load's launch: when the server itself (its API) was ready
    failure: Failure | None = None
    runtime_failure: Failure | None = None
    candidates: list[Candidate] = field(default_factory=list)
    # Errors the server logged that no rule knows: only the latest matter (they explain a death that follows).
    error_lines: deque[Candidate] = field(default_factory=lambda: deque(maxlen=32))
    dying: int | None = None  # line of the first evidence of death before ready
    benign_at: int | None = None  # the latest line a benign rule called harmless, logged with its exception
    # Tracebacks (by their header's line) printed right below a benign line: the warning's own, logged with its
    # exception (TGI's "Could not import Flash Attention enabled models"), which the process survived
    warned_tracebacks: set[int] = field(default_factory=set)
    # The latest line a phase or progress rule took, with its clock then (the decision's and the log's): where a
    # `back` ready rule dates readiness (an offline engine's first request proves its initialisation had ended)
    last_step: tuple[Line, float | None, float | None] | None = None
    # A `tentative` ready line (the server's own "starting server on ..."), its clocks and its rule's words: the
    # readiness once something confirms it
    tentative: tuple[Line, float | None, float | None, str | None] | None = None
    # The latest non-blank line the tracker saw (the prefilter skips lines no rule matches), its rule hits and clock:
    # judged again for readiness when the engine turns out to be another one at the next line (a banner whose
    # second line names the server)
    prev: tuple[Line, list[Rule], float | None, float | None] | None = None
    # A cause_next or detail_next rule's line (its category, its number, what the next line is): the line after it
    # is its message (a Rust panic's: a fatal candidate; NCCL's last error: a detail of the exception above it).
    cause_next: tuple[str | None, int, str] | None = None
    dying_after_ready: int | None = None
    last_no: int = 0
    last_t: float | None = None
    last_log_t: float | None = None  # the log's own clock (last_t is the arrival time for a live analyzer)
    caught_up: bool = False  # a watch read its start from the past at once, not as it was written
    last_line: str = ""  # the last meaningful line, for live views
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=6))

    @property
    def current(self) -> Phase | None:
        return self.phases[-1] if self.phases else None

    @property
    def progressed(self) -> bool:
        """Past the point where a second launch marker can still belong to this launch."""
        if self.ready or self.failure or self.dying:
            return True
        # A stray exception line (a child's sitecustomize warning) does not make a banner after it a new launch.
        if any(c.kind != "loose" for c in self.candidates):
            return True
        return any(p.name not in ("start", "config") for p in self.phases)

    def close_phase(self, no: int, t: float | None, log_t: float | None = None) -> None:
        """`log_t`: the log's clock at line `no` when that is not the latest line (default: the latest's)."""
        cur = self.current
        if cur is not None and cur.end_line is None:
            cur.end_line, cur.end_t, cur.end_log_t = no, t, self.last_log_t if log_t is None else log_t

    def open_phase(self, phase: Phase, log_t: float | None = None) -> None:
        phase.start_log_t = self.last_log_t if log_t is None else log_t
        self.phases.append(phase)
