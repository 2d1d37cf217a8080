"""The terminal view: a ticking clock, the phases so far, the current one with its bar and ETA, the last
meaningful line; at the end a READY or FAILED banner.

It keeps its own small state from the events it receives (it never looks into the tracker), and
rich redraws it on a timer: the clock moves while the server is silent, which is when a person most
wants to see that bootwatch is still watching. Log text is stored already `shown` (secrets masked,
controls escaped) and reaches rich only as `Text`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from bootwatch.durations import fmt_duration
from bootwatch.serving.render import describe
from bootwatch.sinks.summary_text import render
from bootwatch.text import shown
from bootwatch.tracker import (
    ActivityEvent,
    EtaEvent,
    Event,
    FactEvent,
    FailedEvent,
    LaunchEvent,
    LineEvent,
    PhaseEvent,
    ProgressEvent,
    ReadyEvent,
    ServingEvent,
    StalledEvent,
    StallEvent,
    StateEvent,
    TimeoutEvent,
    WarningEvent,
)

REFRESH_PER_S = 4
KEEP_NOTES = 3
# A note ("waiting for X to appear", "X appeared", "a new launch starts") is news, not state: it goes away.
NOTE_TTL_S = 15.0
# Below this the phase table cannot keep names, durations and a bar on one line: plain lines instead.
MIN_COLUMNS = 60
MIN_ROWS = 12
NAME_MAX = 20


@dataclass
class PhaseView:
    name: str
    draft: bool
    seen_at: float  # wall clock when the view learnt of it
    t: float | None  # the event's own time (the log's clock when it has one)
    n: int | None = None
    total: int | None = None
    progress: float | None = None
    done: bool = False
    duration: float | None = None  # once the next phase began
    rate_from: tuple[float, int] | None = None  # (wall time, n) of its first counted step, for the ETA
    history: tuple[float, float, int] | None = None  # p50, p90 of its duration in past startups, and how many
    bytes_eta: tuple[float, float] | None = None  # (wall time, seconds left) from the weights read so far

    @property
    def label(self) -> str:
        return self.name + (" (draft)" if self.draft else "")


@dataclass
class ServerView:
    """What one server (or node) has said so far, from its events."""

    phases: list[PhaseView] = field(default_factory=list)
    last_line: str = ""
    warnings: list[str] = field(default_factory=list)
    health: str = ""
    serving: str = ""  # the latest serving reading, after ready
    ready: str | None = None  # the ready line, shown
    ready_at: float | None = None
    failed: str | None = None  # "(category, line N): text", shown
    failed_runtime: bool = False
    verify: tuple[bool, float, str] | None = None  # ok, latency, error
    end: tuple[str, str] | None = None  # ("stalled" | "timeout", message)
    outcome: str = "starting"  # the verdict machine's state, as its `state` events said it
    quiet: str | None = None  # "no output for 20 s in load_weights": true until the server says something

    @property
    def current(self) -> PhaseView | None:
        return self.phases[-1] if self.phases else None

    def apply(self, ev: Event, now: float) -> str | None:
        """Take one event in; a note to show, if it carries one. A kind not here changes nothing."""
        if isinstance(ev, LineEvent | PhaseEvent | ProgressEvent | WarningEvent | ReadyEvent | FailedEvent):
            self.quiet = None  # it spoke: the silence note is no longer true
        match ev:
            case LineEvent():
                if ev.text:
                    self.last_line = shown(ev.text)
            case PhaseEvent():
                self._on_phase(ev, now)
            case ProgressEvent():
                self._on_progress(ev, now)
            case FactEvent():
                self._on_fact(ev)
            case ServingEvent():
                self.serving = shown(describe(ev))
            case WarningEvent():
                self.warnings = (self.warnings + [shown(f"warning {ev.warning}: {ev.text}")])[-KEEP_NOTES:]
                if ev.text:
                    self.last_line = shown(ev.text)
            case ReadyEvent():
                self.ready = shown(f"line {ev.line_no}: {ev.text}" if ev.line_no else ev.text or "")
                self.ready_at = now
            case FailedEvent():
                where = f"line {ev.line_no}, " if ev.line_no else ""
                self.failed = shown(f"({where}{ev.category}): {ev.text}")
                self.failed_runtime = ev.runtime
            case EtaEvent():
                self._on_eta(ev, now)
            case StallEvent():
                self.quiet = shown(ev.message)
            case ActivityEvent():
                return shown(ev.message)
            case LaunchEvent():
                return f"a new launch starts at line {ev.line_no}"
            case StalledEvent() | TimeoutEvent():
                self.end = (ev.kind, shown(ev.message))
            case StateEvent():
                self.outcome = ev.state
        return None

    # ---- the kinds that need more than a few lines ---------------------------------------------------
    def _on_phase(self, ev: PhaseEvent, now: float) -> None:
        self._begin(ev.name, ev.draft, ev.t, now)
        if ev.text:
            self.last_line = shown(ev.text)
        if ev.name == "ready" and self.ready is None:  # a catch-up snapshot has the phase, not the event
            self.ready = shown(f"line {ev.line_no}: {ev.text}" if ev.text else f"line {ev.line_no}")
            self.ready_at = now

    def _on_progress(self, ev: ProgressEvent, now: float) -> None:
        cur = self.current
        if cur is None or cur.name != ev.phase:
            self._begin(ev.phase, False, ev.t, now)
            cur = self.current
        assert cur is not None
        if ev.progress is not None:
            cur.progress = float(ev.progress)
            cur.done = cur.done or cur.progress >= 1.0
        if ev.n is not None:
            cur.n, cur.total = int(ev.n), ev.total
            if cur.rate_from is None:  # the ETA's rate counts from the first step seen
                cur.rate_from = (now, cur.n)

    def _on_fact(self, ev: FactEvent) -> None:
        if ev.name == "health":
            self.health = shown(ev.value)
        elif ev.name == "verify_latency_s":
            self.verify = (
                ev.ok is not False,
                float(ev.value or 0.0),
                shown(ev.error or ""),
            )

    def _on_eta(self, ev: EtaEvent, now: float) -> None:
        cur = self.current
        if cur is None or cur.name != ev.phase or cur.draft != bool(ev.draft):
            return  # an estimate for a phase already left
        if ev.basis == "bytes":
            cur.bytes_eta = (now, float(ev.eta_s or 0.0))
            if cur.total is None and ev.progress is not None:
                cur.progress = float(ev.progress)
        elif ev.p50_s is not None:
            cur.history = (float(ev.p50_s), float(ev.p90_s or 0.0), int(ev.n or 0))

    def _begin(self, name: str, draft: bool, t: float | None, now: float) -> None:
        cur = self.current
        if cur is not None and cur.name == name and cur.draft == draft:
            return
        if cur is not None and cur.duration is None:
            cur.duration = t - cur.t if t is not None and cur.t is not None else now - cur.seen_at
        self.phases.append(PhaseView(name, draft, now, t, done=name == "ready"))

    def state(self) -> str:
        """The machine's state: this view shows it, never works it out."""
        return self.outcome


def _eta(p: PhaseView, now: float) -> str:
    """From the log's own count, else the weights read, else past startups (with how many it rests on)."""
    by_count = _count_eta(p, now)
    if by_count:
        return by_count
    band = _history_band(p, now)
    if p.bytes_eta is not None:
        t0, left = p.bytes_eta
        return f"ETA {fmt_duration(max(0.0, left - (now - t0)))} (weights read)" + (f" · {band}" if band else "")
    return _history_eta(p, now, band)


def _count_eta(p: PhaseView, now: float) -> str:
    """The rate of the steps counted since the first one seen, over the steps left; "" until there is a rate."""
    if p.n is not None and p.total and p.rate_from is not None and p.n < p.total:
        t0, n0 = p.rate_from
        if p.n > n0 and now > t0:
            return f"ETA {fmt_duration((p.total - p.n) / ((p.n - n0) / (now - t0)))}"
    return ""


def _from_startups(n: int) -> str:
    return f"from {n} startup{'s' if n != 1 else ''}"


def _history_band(p: PhaseView, now: float) -> str:
    """How long the phase may still take by past startups' p90, and how many startups say so."""
    if p.history is None:
        return ""
    _, p90, n = p.history
    return f"(p90 {fmt_duration(max(0.0, p90 - (now - p.seen_at)))}) · {_from_startups(n)}"


def _history_eta(p: PhaseView, now: float, band: str) -> str:
    if p.history is None:
        return ""
    p50, p90, n = p.history
    took = now - p.seen_at
    if took > p90:
        return f"past its p90 ({fmt_duration(p90)}) · {_from_startups(n)}"
    if took > p50:
        return f"past its p50 ({fmt_duration(p50)}) {band}"
    return f"ETA {fmt_duration(p50 - took)} {band}"


def _line(text: str, style: str = "") -> Text:
    """One screen line of (already shown) log text: cut at the edge rather than wrapped."""
    return Text(text, style=style, no_wrap=True, overflow="ellipsis")


def banner(view: ServerView, now: float, started: float) -> RenderableType | None:
    """READY (the ready line, time to ready, the verify latency) or FAILED (the root-cause line)."""
    state = view.state()
    if state == "failed":
        return _failed_banner(view)
    if state in ("ready", "died", "stopped"):
        return _ready_banner(view, state, started)
    if view.end is not None:
        return Panel(
            Text(f"{view.end[0].upper()}: {view.end[1]}", style="bold yellow"), border_style="yellow", expand=False
        )
    return None


def _failed_banner(view: ServerView) -> Panel:
    body = Text()
    body.append("FAILED ", style="bold red")
    if view.failed is not None:
        body.append(view.failed)
    elif view.verify is not None:
        body.append(f"the model did not generate: {view.verify[2]}")
    return Panel(body, border_style="red", expand=False)


def _ready_banner(view: ServerView, state: str, started: float) -> Panel:
    """READY; yellow, with the cause, when the server died after it."""
    body = Text()
    body.append("READY", style="bold green")
    if view.ready_at is not None:
        body.append(f" after {fmt_duration(view.ready_at - started)}", style="green")
    if view.verify is not None:
        body.append(f"   verify: one completion in {fmt_duration(view.verify[1])}", style="green")
    body.append("\n" + (view.ready or ""))
    if state == "died" and view.failed is not None:
        body.append("\nafter readiness the server died ", style="bold yellow")
        body.append(view.failed, style="yellow")
    return Panel(body, border_style="yellow" if state == "died" else "green", expand=False)


class Screen:
    """The renderable rich's Live redraws on its timer: every draw reads the wall clock."""

    def __init__(self, sink: LiveSink, clock: Callable[[], float]) -> None:
        self.sink = sink
        self.clock = clock

    def __rich__(self) -> RenderableType:
        with self.sink.lock:
            return self.sink.render(self.clock())


class LiveSink:
    def __init__(
        self, names: list[str], source: str, console: Console | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.names = names
        self.views = {name: ServerView() for name in names}
        self.source = source
        self.console = console or Console(highlight=False)
        self.clock = clock
        self.started = clock()
        self.notes: list[tuple[str, float]] = []  # (text, when): shown for NOTE_TTL_S
        self.end: tuple[str, str] | None = None  # the cluster's own stall or timeout
        self.lock = threading.Lock()  # the refresh thread draws while the event loop updates
        self.handed_over = False  # another program (--then) has the terminal: no more drawing
        self.live = Live(Screen(self, clock), console=self.console, refresh_per_second=REFRESH_PER_S, transient=True)
        self.live.start()

    @staticmethod
    def fits(console: Console) -> bool:
        """Whether the terminal is large enough for this view; else plain lines serve better."""
        return console.width >= MIN_COLUMNS and console.height >= MIN_ROWS

    @property
    def several(self) -> bool:
        return len(self.names) > 1

    def _view(self, ev: Event) -> ServerView | None:
        if ev.node is None:
            return None if self.several else self.views[self.names[0]]
        return self.views.setdefault(ev.node, ServerView())

    def _add_note(self, text: str) -> None:
        self.notes = (self.notes + [(text, self.clock())])[-KEEP_NOTES:]

    def note(self, now: float, text: str) -> None:
        if self.handed_over:  # after --then began: a line of its own, below what the command printed
            self.console.print(Text(shown(text), style="yellow"))
            return
        with self.lock:
            self._add_note(shown(text))

    def event(self, ev: Event, now: float) -> None:
        with self.lock:
            view = self._view(ev)
            if view is not None and isinstance(ev, LaunchEvent):  # the same log holds a new launch: start over
                view = self.views[ev.node or self.names[0]] = ServerView()
            if view is None:  # the cluster's own verdicts
                if isinstance(ev, StalledEvent | TimeoutEvent):
                    self.end = (ev.kind, shown(ev.message))
                elif isinstance(ev, StallEvent):
                    self._add_note(shown(ev.message))
                return
            note = view.apply(ev, now)
            if note:
                prefix = f"[{ev.node}] " if self.several else ""
                self._add_note(shown(prefix) + note)
            decided = isinstance(ev, StateEvent | FailedEvent)
        if decided and not self.handed_over:
            self.live.refresh()  # a verdict shows at once, not at the next tick

    # ---- drawing (under the lock) ------------------------------------------------------------------
    def _head(self, now: float) -> Text:
        head = Text(f"bootwatch  {shown(self.source)}   ", style="bold")
        head.append(f"elapsed {fmt_duration(now - self.started)}", style="bold")
        if not self.several:
            view = self.views[self.names[0]]
            if view.health:
                head.append(f"   health: {view.health}", style="cyan")
        return head

    def _phases(self, view: ServerView, now: float) -> Table:
        """One line per phase: its name, how long it took (or takes so far, ticking), and for the phase under
        way its bar, count and ETA. Widths come from the terminal: at 80 columns nothing is cut."""
        width = self.console.width
        name_w = min(NAME_MAX, max((len(p.label) for p in view.phases), default=5)) + 2
        bar_w = max(8, min(30, width - name_w - 9 - 28))
        t = Table.grid(padding=(0, 1))
        t.add_column(width=name_w, no_wrap=True, overflow="ellipsis")
        t.add_column(justify="right", width=8, no_wrap=True)
        t.add_column(no_wrap=True, overflow="ellipsis")
        last = len(view.phases) - 1
        starting = view.state() == "starting"
        for i, p in enumerate(view.phases):
            if p.name == "ready":
                t.add_row(Text("  ready", style="green"), Text(""), Text(""))
            elif i == last and starting:
                t.add_row(*_current_phase_row(p, now, bar_w))
            else:
                dur = p.duration if p.duration is not None else now - p.seen_at
                count = f" {p.n}/{p.total}" if p.total else ""
                mark = "✓" if p.done or i < last else ""
                t.add_row(Text("  " + p.label), Text(fmt_duration(dur)), Text(mark + count, style="green"))
        return t

    def _rows(self, now: float) -> Table:
        """Several nodes or servers: one row each."""
        t = Table(box=None, header_style="bold", pad_edge=False)
        for col in ("node", "phase", "progress", "last line"):
            t.add_column(col, no_wrap=True)
        for name, view in self.views.items():
            cur = view.current
            state = view.state()
            if state == "starting":
                phase, style = (cur.label if cur else "waiting"), "cyan"
            else:
                phase, style = state.upper(), {"ready": "green", "failed": "red"}.get(state, "yellow")
            prog = f"{cur.n}/{cur.total}" if cur is not None and cur.total else ""
            t.add_row(Text(shown(name)), Text(phase, style=style), prog, _line(view.last_line, "dim"))
        return t

    def render(self, now: float) -> RenderableType:
        parts = [self._head(now), *(self._several_parts(now) if self.several else self._single_parts(now))]
        if self.end is not None:
            parts.append(Text(f"{self.end[0].upper()}: {self.end[1]}", style="bold yellow"))
        parts += [_line(text, "yellow") for text, at in self.notes if now - at < NOTE_TTL_S]
        if not self.several:
            view = self.views[self.names[0]]
            if view.quiet and view.state() == "starting":
                parts.append(_line(view.quiet, "yellow"))
            if view.last_line:
                parts.append(_line("last: " + view.last_line, "dim"))
        return Group(*parts)

    def _several_parts(self, now: float) -> list[RenderableType]:
        """A row per server; a banner only for those that failed or died (ready ones say so in their row)."""
        parts: list[RenderableType] = [self._rows(now)]
        for view in self.views.values():
            if view.state() in ("failed", "died"):
                b = banner(view, now, self.started)
                if b is not None:
                    parts.append(b)
        return parts

    def _single_parts(self, now: float) -> list[RenderableType]:
        view = self.views[self.names[0]]
        parts: list[RenderableType] = []
        b = banner(view, now, self.started)
        if b is not None:
            parts.append(b)
        if not view.phases:
            parts.append(Text("waiting for the server's first line...", style="dim"))
        else:
            parts.append(self._phases(view, now))
        if view.serving:
            parts.append(_line("serving: " + view.serving, "cyan"))
        parts += [_line(w, "yellow") for w in view.warnings]
        return parts

    # ---- the end -----------------------------------------------------------------------------------
    def _final_banner(self, summary: dict[str, Any], now: float) -> RenderableType | None:
        """The banner again, once the live view is gone, with what only the summary knows."""
        view = ServerView() if self.several else self.views[self.names[0]]
        verdict = summary.get("verdict")
        view.outcome = str(summary.get("outcome") or view.outcome)
        if summary.get("verify"):
            view.verify = _verify_of(summary["verify"])
        if verdict == "ready" and summary.get("ready"):
            self._final_ready(view, summary, now)
        elif verdict == "failed" and summary.get("failure"):
            view.failed = _failure_text(summary["failure"])
            view.failed_runtime = False
        elif verdict in ("stalled", "timeout") and view.end is None and self.end is not None:
            view.end = self.end
        return banner(view, now, self.started)

    def _final_ready(self, view: ServerView, summary: dict[str, Any], now: float) -> None:
        ready = summary["ready"]
        view.ready = shown(
            f"line {ready['line_no']}: {ready['text']}" if ready.get("line_no") else ready.get("text", "")
        )
        ttr = summary.get("time_to_ready_s")
        view.ready_at = self.started + float(ttr) if isinstance(ttr, int | float) else (view.ready_at or now)
        if not summary.get("runtime_failure"):
            view.failed = None

    def handover(self, summary: dict[str, Any], now: float, what: str) -> None:
        """Another program (the --then command) takes the terminal: the live view ends here with the
        startup's summary, so that nothing that program prints is drawn over, and what it prints is the last
        thing on the screen but for one closing line."""
        with self.lock:
            if self.handed_over:
                return
            self.handed_over = True
            final = self._final_banner(summary, now)
        self.live.stop()
        if final is not None:
            self.console.print(final)
        render(summary, self.source, self.console)
        self.console.print(Text(f"running {shown(what)}", style="bold"))

    def close(self, summary: dict[str, Any], now: float) -> None:
        if self.handed_over:  # the summary was printed before the command ran: the verdict, in one line
            verdict = str(summary.get("verdict") or "unknown")
            style = {"ready": "bold green", "failed": "bold red"}.get(verdict, "bold yellow")
            engine = summary.get("engine_display") or summary.get("engine") or ""
            self.console.print(Text(f"{verdict.upper()}   {shown(str(engine))}   {shown(self.source)}", style=style))
            return
        with self.lock:
            final = self._final_banner(summary, now)
        self.live.stop()
        if final is not None:
            self.console.print(final)
        render(summary, self.source, self.console)


def _verify_of(verify: dict[str, Any]) -> tuple[bool, float, str]:
    return bool(verify.get("ok")), float(verify.get("latency_s") or 0.0), shown(verify.get("error") or "")


def _failure_text(failure: dict[str, Any]) -> str:
    where = f"line {failure['line_no']}, " if failure.get("line_no") else ""
    node = f", node {failure['node']}" if failure.get("node") else ""
    return shown(f"({where}{failure.get('category', 'unknown')}{node}): {failure.get('text')}")


def _current_phase_row(p: PhaseView, now: float, bar_w: int) -> tuple[Text, Text, Table]:
    """The phase under way, highlighted: its ticking duration, its bar, its count and its ETA."""
    row = Table.grid(padding=(0, 1))
    if p.progress is not None:
        row.add_column(width=bar_w, no_wrap=True)
    row.add_column(no_wrap=True, overflow="ellipsis")
    count = f"{p.n}/{p.total}" if p.total else (f"{p.progress:.0%}" if p.progress is not None else "")
    detail = Text(" ".join(x for x in (count, _eta(p, now)) if x), style="cyan")
    if p.progress is not None:
        row.add_row(ProgressBar(total=1.0, completed=p.progress, width=bar_w), detail)
    else:
        row.add_row(detail)
    return Text("> " + p.label, style="bold cyan"), Text(fmt_duration(now - p.seen_at), style="bold cyan"), row


__all__ = ["LiveSink", "ServerView", "banner"]
