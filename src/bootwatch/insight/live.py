"""The session's side of startup intelligence: it samples the tree (activity), finds the weights, looks up
history once the engine and model are known, and turns phase changes into ETA and regression events.

It never decides anything: the verdict machine reads the activity samples; this only adds events."""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import psutil

from bootwatch.insight.activity import ActivitySampler
from bootwatch.insight.eta import Book, book_from, phase_key, regression
from bootwatch.insight.weights import find_weights, model_paths_from_argv
from bootwatch.tracker import EtaEvent, Event, LaunchEvent, PhaseEvent, WarningEvent
from bootwatch.vocab.activity import Activity

if TYPE_CHECKING:
    from bootwatch.pipeline import Analyzer
    from bootwatch.store import Similar
    from bootwatch.tracker.tracker import Tracker

BYTES_ETA_EVERY_S = 5.0
HISTORY_LIMIT = 20

Lookup = Callable[[str, "str | None", dict[str, Any], "str | None"], "Similar"]


def _history_lookup(engine: str, model: str | None, facts: dict[str, Any], host: str | None) -> Similar:
    from bootwatch.store import similar  # sqlite3 is imported once a phase is known, not before the first line

    return similar(engine, model, facts, host, HISTORY_LIMIT)


class Insight:
    def __init__(
        self,
        tracker: Tracker,
        tree: Callable[[], list[psutil.Process]] | None,
        argv: Sequence[str] = (),
        count_from_zero: bool = True,
        lookup: Lookup | None = None,
        host: str | None = None,
    ) -> None:
        self.tracker = tracker
        self.process: psutil.Process | None = None  # the server's process the user named (`watch --pid`)
        self.argv = list(argv)
        self.sampler = (
            ActivitySampler(tree, find_weights(model_paths_from_argv(argv)), count_from_zero)
            if tree is not None
            else None
        )
        self.lookup = lookup or _history_lookup
        self.host = host or socket.gethostname()
        self._book_key: tuple[str, str | None, str] | None = None
        self.book: Book | None = None
        self._phase: tuple[str, bool, float] | None = None  # name, draft, since
        self._models_tried: set[str] = set()
        self._bytes_eta_t = 0.0
        self._start_said = False

    # ---- history -----------------------------------------------------------------------------------
    def _refresh_book(self) -> Book | None:
        launch = self.tracker.launch
        if launch is None or launch.engine == "unknown":
            return self.book
        facts = dict(launch.facts)
        model = facts.get("model")
        model = str(model) if model is not None else None
        key = (launch.engine, model, repr(sorted((k, repr(v)) for k, v in facts.items())))
        if key != self._book_key:
            self._book_key = key
            version = facts.get("engine_version")
            try:
                self.book = book_from(
                    self.lookup(launch.engine, model, facts, self.host), str(version) if version is not None else None
                )
            except Exception:  # noqa: BLE001 - history only helps: a store that cannot be read gives no ETA
                self.book = None
        return self.book

    def _weights_from_log(self) -> None:
        """The log names the model (a local directory) when the command line did not."""
        if self.sampler is None or self.sampler.weights is not None or self.tracker.launch is None:
            return
        model = self.tracker.launch.facts.get("model")
        if isinstance(model, str) and model not in self._models_tried:
            self._models_tried.add(model)
            self.sampler.weights = find_weights([model])

    # ---- events ------------------------------------------------------------------------------------
    def on_events(self, events: Sequence[Event], now: float) -> list[Event]:
        out: list[Event] = []
        for ev in events:
            if isinstance(ev, LaunchEvent):
                self._phase, self._start_said = None, False
            if not self._start_said and self._phase is None:
                out += self._start_eta(now)
            if not isinstance(ev, PhaseEvent):
                continue
            name, draft = ev.name, ev.draft
            t = ev.t if ev.t is not None else now
            book = self._refresh_book()
            if self._phase is not None:
                prev, prev_draft, since = self._phase
                took = t - since
                text = regression(prev, prev_draft, took, book)
                if text is not None:
                    band = book.phases[phase_key(prev, prev_draft)] if book is not None else None
                    out.append(
                        WarningEvent(
                            t=t,
                            line_no=None,
                            warning="slow_phase",
                            text=text,
                            details={
                                "phase": prev,
                                "took_s": round(took, 3),
                                "median_s": round(band.p50_s, 3) if band else None,
                                "n": band.n if band else None,
                            },
                        )
                    )
            self._phase = (name, draft, t)
            if name == "load_weights" and not draft and self.sampler is not None:
                self._weights_from_log()
                self.sampler.load_began()
            if name != "ready" and book is not None:
                eta = self._eta(name, draft, book, t)
                if eta is not None:
                    out.append(eta)
        return out

    def _start_eta(self, now: float) -> list[Event]:
        """The first phase begins before any line says so: its ETA (and the whole startup's) once the engine
        is known. Its length is not judged for regressions: where it began depends on when we looked."""
        launch = self.tracker.launch
        if launch is None or launch.engine == "unknown" or not launch.phases or launch.phases[0].name != "start":
            return []
        self._start_said = True
        book = self._refresh_book()
        eta = self._eta("start", False, book, now) if book is not None else None
        return [eta] if eta is not None else []

    @staticmethod
    def _eta(name: str, draft: bool, book: Book, t: float) -> EtaEvent | None:
        key = phase_key(name, draft)
        band, rest = book.phases.get(key), book.to_ready_from.get(key)
        if band is None and rest is None:
            return None
        eta = EtaEvent(t=t, phase=name, draft=draft, basis=book.basis, n=book.n)
        if band is not None:
            eta.p50_s, eta.p90_s, eta.n = round(band.p50_s, 3), round(band.p90_s, 3), band.n
        if rest is not None:
            eta.to_ready_p50_s, eta.to_ready_p90_s = round(rest.p50_s, 3), round(rest.p90_s, 3)
        return eta

    # ---- ticks -------------------------------------------------------------------------------------
    def tick(self, now: float, phase: str) -> tuple[Activity | None, list[Event]]:
        """One sample of the tree (at most one a second) and, while weights load, a bytes-based ETA."""
        if self.sampler is None:
            return None, []
        self._weights_from_log()
        a = self.sampler.sample(now)
        out: list[Event] = []
        if (
            a is not None
            and a.t == now
            and phase == "load_weights"
            and a.weights_total
            and a.reading
            and a.eta_s is not None
            and now - self._bytes_eta_t >= BYTES_ETA_EVERY_S
        ):
            self._bytes_eta_t = now
            out.append(
                EtaEvent(
                    t=now,
                    phase="load_weights",
                    basis="bytes",
                    eta_s=round(a.eta_s, 1),
                    read_bps=round(a.read_bps),
                    weights_read_bytes=a.weights_read,
                    weights_total_bytes=a.weights_total,
                    progress=round((a.weights_read or 0) / a.weights_total, 3),
                )
            )
        return a, out


def watch_insight(analyzer: Analyzer, pid: int | None) -> Insight:
    """`watch`: ETAs from history always; the tree's activity only for the process the user named (never a
    guess among other users' processes)."""
    from bootwatch.errors import UsageError
    from bootwatch.insight.activity import tree_of

    if pid is None:
        return Insight(analyzer.tracker, None)
    try:
        proc = psutil.Process(pid)
        argv = proc.cmdline()
    except psutil.NoSuchProcess:
        raise UsageError(f"--pid {pid}: no such process") from None
    except psutil.AccessDenied:
        argv = []
    insight = Insight(analyzer.tracker, tree_of(pid), argv, count_from_zero=False)
    insight.process = proc
    return insight


__all__ = ["Insight", "watch_insight"]
