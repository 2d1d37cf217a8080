"""ETAs from history: how long each phase took in past ready startups like this one (p50 and p90), how
long from a phase's start to ready, and whether a phase that just ended took much longer than usual."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bootwatch.durations import fmt_duration

if TYPE_CHECKING:  # the store (sqlite3) is imported when history is first asked, not when a watch starts
    from bootwatch.store import Similar, StoredPhase, StoredStartup

# A phase is a regression when it took this many times its median, and by enough seconds to matter (a 0.2 s
# phase taking 0.7 s is noise).
REGRESSION_FACTOR = 2.0
REGRESSION_MIN_S = 5.0
REGRESSION_MIN_N = 3
SAME_VERSION_MIN = 3  # enough past startups of the same version to use them alone
# Startups of the same model started the same way but with other settings (dtype, context) teach only in
# numbers; those with exactly these settings from the first one.
ALIKE_MIN = 3
# A median this short is no time at all (a phase that ends on the line after it began): an ETA or a
# "took N× its median" built on it says nothing true.
QUOTABLE_S = 0.05


def quantile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    xs = sorted(values)
    if not xs:
        raise ValueError("no values")
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class Band:
    p50_s: float
    p90_s: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Band | None:
        return cls(quantile(values, 0.5), quantile(values, 0.9), len(values)) if values else None


@dataclass(frozen=True)
class Book:
    """What history says of startups like this one."""

    basis: str  # how close they are: "engine+version+model+args", "engine+model", ...
    n: int
    phases: dict[str, Band] = field(default_factory=dict)  # phase key -> its duration
    to_ready_from: dict[str, Band] = field(default_factory=dict)  # phase key -> its start to ready
    to_ready: Band | None = None


def phase_key(name: str, draft: bool) -> str:
    return f"draft:{name}" if draft else name


def book_from(found: Similar, version: str | None = None) -> Book | None:
    from bootwatch.store import Match

    if found.match is None or not found.startups:
        return None
    if found.match is not Match.ARGS and len(found.startups) < ALIKE_MIN:
        return None
    startups, basis = _comparable(found, version)
    durations, to_ready = _samples(startups)
    totals = [s.time_to_ready_s for s in startups if s.time_to_ready_s is not None]
    whole = Band.of(totals)
    return Book(basis, len(startups), _bands(durations), _bands(to_ready), whole if _quotable(whole) else None)


def _comparable(found: Similar, version: str | None) -> tuple[Sequence[StoredStartup], str]:
    """The startups to learn from and how alike they are: the same version's alone when there are enough of
    them (or no others), since a new version often changes how long a phase takes."""
    basis = str(found.match)
    same = [s for s in found.startups if version and s.engine_version == version]
    if len(same) >= SAME_VERSION_MIN or (same and len(same) == len(found.startups)):
        return same, basis.replace("engine", "engine+version", 1)
    return found.startups, basis


def _first_entries(startup: StoredStartup) -> Iterator[tuple[str, StoredPhase]]:
    """Each phase of a startup once, keyed: a phase entered twice is comparable only the first time, and
    ready is where the startup ends, not a phase that takes time."""
    seen: set[str] = set()
    for p in startup.phases:
        key = phase_key(p.name, p.draft)
        if key in seen or p.name == "ready":
            continue
        seen.add(key)
        yield key, p


def _samples(startups: Sequence[StoredStartup]) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per phase key: how long it took, and how long from its start to ready, over the startups."""
    durations: dict[str, list[float]] = {}
    to_ready: dict[str, list[float]] = {}
    for s in startups:
        for key, p in _first_entries(s):
            if p.duration_s is not None:
                durations.setdefault(key, []).append(p.duration_s)
            if s.time_to_ready_s is not None and p.start_offset_s is not None:
                to_ready.setdefault(key, []).append(max(0.0, s.time_to_ready_s - p.start_offset_s))
    return durations, to_ready


def _bands(samples: dict[str, list[float]]) -> dict[str, Band]:
    return {k: b for k, v in samples.items() if (b := Band.of(v)) is not None and _quotable(b)}


def _quotable(band: Band | None) -> bool:
    return band is not None and band.p50_s >= QUOTABLE_S


def regression(name: str, draft: bool, took_s: float, book: Book | None) -> str | None:
    """'load_weights took 3.1× its median of the last 5 (31s vs 10s)', or None when it is within bounds."""
    band = book.phases.get(phase_key(name, draft)) if book is not None else None
    if band is None or band.n < REGRESSION_MIN_N:
        return None
    median = band.p50_s
    if took_s < median * REGRESSION_FACTOR or took_s - median < REGRESSION_MIN_S:
        return None
    ratio = f"{took_s / median:.1f}×" if median > 0 else "far longer than"
    return (
        f"{'draft ' if draft else ''}{name} took {ratio} its median of the last {band.n} "
        f"({fmt_duration(took_s)} vs {fmt_duration(median)})"
    )


__all__ = ["Band", "Book", "book_from", "phase_key", "quantile", "regression"]
