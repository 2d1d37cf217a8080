"""The serving side of one launch: lines (after ready) and /metrics readings in, `serving` and `warning`
events out. Held by the Tracker, which hands it every line once the launch is ready; the live session hands
it /metrics readings. No I/O, no clock of its own: times come with the samples."""

from __future__ import annotations

from typing import Any

from bootwatch.engines.rules import Rule
from bootwatch.lines import Line
from bootwatch.serving.aggregate import Aggregate
from bootwatch.serving.detectors import HANG_S, Context, Detector, Finding, all_detectors
from bootwatch.serving.stats import ServingSample, from_groups
from bootwatch.tracker.events import Event, ServingEvent, WarningEvent

INTERVAL_S = 1.0  # at most one `serving` event per interval of the samples' clock
FRESH_S = 5.0  # readings of other ranks this recent count in the combined view


def _context_of(launch: Any) -> Context:
    rules = launch.rules
    flag = rules.serving.concurrency_flag if rules.serving is not None else ""
    return Context(launch.engine, launch.facts, launch.fact_lines, rules.capacity, flag)


class ServingTracker:
    def __init__(self, interval_s: float = INTERVAL_S, hang_s: float = HANG_S) -> None:
        self.interval_s = interval_s
        self.hang_s = hang_s
        self._launch: Any = None
        self._reset()

    def _reset(self) -> None:
        self.aggregate = Aggregate()
        self.detectors: list[Detector] = all_detectors(self.hang_s)
        self.findings: list[Finding] = []
        self._fired: set[str] = set()
        self._latest: dict[tuple[str, str | None], ServingSample] = {}  # (source, rank) -> its last reading
        self._last_emit: dict[str, float | None] = {}  # by source: the log's clock and /metrics' may differ
        self._stats_ids: dict[str, set[int]] = {}
        self._ctx: Context | None = None

    # ---- input -------------------------------------------------------------------------------------
    def feed_line(self, launch: Any, line: Line, hits: list[Rule]) -> list[Event]:
        """A line of a ready launch; `hits` are the rules its text matched (from the tracker)."""
        if not hits:
            return []
        ids = self._ids(launch)
        out: list[Event] = []
        for r in hits:
            if r.kind != "stats" or id(r) not in ids:
                continue
            m = r.regex.search(line.text)
            if m is None:
                continue
            if r.fields is not None:
                m = r.fields.search(line.raw)
                if m is None:
                    continue
            groups = {k: v for k, v in m.groupdict().items() if v is not None}
            sample = from_groups(
                r.name or "stats", groups, line.t, line.no, line.proc, r.cause, r.message, r.fix, launch.facts
            )
            out += self.feed_sample(launch, sample)
            break  # one reading per line: the first rule of the engine's file that reads it
        return out

    def feed_sample(self, launch: Any, s: ServingSample) -> list[Event]:
        """One reading (from a line or a /metrics scrape): detectors, the aggregate, and a `serving` event at
        most once per interval."""
        if launch is not self._launch:
            self._launch = launch
            self._reset()
        self.aggregate.add(s)
        ctx = self._context(launch)
        if ctx.engine != launch.engine:  # the engine was recognised late: its own rules and names from now on
            ctx = self._ctx = _context_of(launch)
        out: list[Event] = []
        for d in self.detectors:
            if d.kind in self._fired:
                continue
            f = d.observe(s, ctx)
            if f is not None:
                self._fired.add(d.kind)
                self.findings.append(f)
                out.append(self._warn(launch, f))
        if s.gen_tps is not None and s.running:
            ctx.throughputs.append(s.gen_tps)
        if s.kind not in ("jit", "request"):  # a request's outcome carries no load numbers: no reading of its own
            src = s.source.value
            self._latest[(src, s.proc)] = s
            last = self._last_emit.get(src)
            if s.t is None or last is None or s.t - last >= self.interval_s or s.t < last:
                self._last_emit[src] = s.t
                out.append(self.snapshot(s))
        return out

    # ---- views -------------------------------------------------------------------------------------
    def snapshot(self, s: ServingSample) -> ServingEvent:
        """The `serving` event, the live line: the latest reading of each rank of the sample's source,
        combined (requests and throughput add up over DP ranks; KV use and acceptance are averaged)."""
        now, source = s.t, s.source.value
        same = [
            x
            for (src, _), x in self._latest.items()
            if src == source and (now is None or x.t is None or now - x.t <= FRESH_S)
        ] or [s]

        def total(name: str) -> float | None:
            vals = [getattr(x, name) for x in same if getattr(x, name) is not None]
            return sum(vals) if vals else None

        def mean(name: str) -> float | None:
            vals = [getattr(x, name) for x in same if getattr(x, name) is not None]
            return sum(vals) / len(vals) if vals else None

        def count(name: str) -> int | None:
            v = total(name)
            return int(v) if v is not None else None

        def rounded(v: float | None, digits: int) -> float | None:
            return round(v, digits) if v is not None else None

        tps = total("gen_tps") if s.kind not in ("timing", "success") else s.gen_tps
        return ServingEvent(
            t=s.t,
            source=source,
            line_no=s.line_no,
            reading=s.kind,
            running=count("running"),
            queued=count("queued"),
            gen_tps=rounded(tps, 2),
            kv_usage=rounded(mean("kv_usage"), 3),
            accept_len=rounded(mean("accept_len"), 3),
            accept_rate=rounded(mean("accept_rate"), 3),
            preemptions=self.aggregate.preemptions,
            ranks=len(same) if len(same) > 1 else None,
        )

    def latest(self) -> ServingEvent | None:
        newest = max(self._latest.values(), key=lambda x: x.line_no or 0, default=None)
        return self.snapshot(newest) if newest is not None else None

    def summary(self) -> dict[str, Any] | None:
        block = self.aggregate.to_json()
        if block is None:
            return None
        block["findings"] = [f.kind for f in self.findings]
        return block

    # ---- helpers -----------------------------------------------------------------------------------
    def _ids(self, launch: Any) -> set[int]:
        engine = launch.engine
        if engine not in self._stats_ids:
            self._stats_ids[engine] = {id(r) for r in launch.rules["stats"]}
        return self._stats_ids[engine]

    def _context(self, launch: Any) -> Context:
        if self._ctx is None:
            self._ctx = _context_of(launch)
        return self._ctx

    def _warn(self, launch: Any, f: Finding) -> WarningEvent:
        w = f.to_warning()
        if f.kind not in launch.warned:
            launch.warned.add(f.kind)
            launch.warnings.append(w)
        return WarningEvent.of(f.t, w)
