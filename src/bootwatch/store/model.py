"""One startup as the history store keeps it: built from a summary, every text redacted and capped."""

from __future__ import annotations

import json
import math
import socket
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bootwatch.errors import UsageError
from bootwatch.sources.spec import parse_source
from bootwatch.text.redact import redact

# Caps keep one row small whatever the log held: a root cause line can be a 100 KB args dump.
ROOT_CAUSE_CAP = 2048
TEXT_CAP = 512  # model, source, host, an argument's value
NAME_CAP = 64  # engine, version, verdict, category, phase name
MAX_PHASES = 64

# The facts that change how long a startup takes (and so what an ETA may compare). Effective values that
# depend on free memory (max_total_num_tokens, kv_cache_tokens) are left out: they differ between runs of
# the very same command.
ARG_KEYS = (
    "tp_size",
    "dp_size",
    "pp_size",
    "ep_size",
    "context_length",
    "dtype",
    "quantization",
    "kv_cache_dtype",
    "speculative_algorithm",
    "draft_model",
    "speculative_num_steps",
    "enforce_eager",
    "disable_cuda_graph",
)
# Of those, the ones (with their defaults) that change which phases run and how heavy they are: startups that differ in them are
# not alike at all (another context length or dtype is close enough to learn from; another TP size is not).
STARTUP_KEYS: dict[str, object] = {
    "tp_size": 1,
    "dp_size": 1,
    "pp_size": 1,
    "ep_size": 1,
    "speculative_algorithm": None,
    "draft_model": None,
    "speculative_num_steps": None,
    "enforce_eager": False,
    "disable_cuda_graph": False,
}
# Where a server reports both the value asked for and the one it settled on, the asked one is the setting.
_CONTEXT_KEYS = ("context_length_args", "max_model_len", "context_length")


class Command(StrEnum):
    WATCH = "watch"
    RUN = "run"


def clean(value: object, cap: int) -> str:
    """`value` as text fit to store: secrets masked before anything is cut (a cut secret would no longer
    match), undecodable bytes escaped (SQLite takes only valid UTF-8), at most `cap` characters."""
    s = redact(value if isinstance(value, str) else str(value))
    s = s.encode("utf-8", "backslashreplace").decode("utf-8")
    return s if len(s) <= cap else s[: cap - 1] + "…"


def clean_opt(value: object, cap: int) -> str | None:
    return None if value is None or value == "" else clean(value, cap)


def number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


# A time a history row may hold: from 1970 to the year 2286 (seconds below 1e10). Past it `time.localtime`
# overflows ("timestamp out of range" for 1e300), and no startup bootwatch saw can have happened there.
MAX_TIME = 1e10


def timestamp(value: object) -> float | None:
    """`value` as a Unix time a startup can have, else None (text, NaN, 1e300, a negative number)."""
    t = number(value)
    return t if t is not None and 0 <= t < MAX_TIME else None


def line_no(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def key_args(facts: dict[str, Any]) -> dict[str, Any]:
    """The configuration facts that matter for startup time, normalised so equal settings compare equal."""
    out: dict[str, Any] = {}
    for key in ARG_KEYS:
        if key == "context_length":
            value = next((facts[k] for k in _CONTEXT_KEYS if facts.get(k) is not None), None)
        else:
            value = facts.get(key)
        if value is None:
            continue
        if isinstance(value, bool | int):
            out[key] = value
        elif isinstance(value, float):
            if math.isfinite(value):
                out[key] = value
        else:
            out[key] = clean(value, TEXT_CAP)
    return out


def startup_shape(args: dict[str, Any]) -> dict[str, Any]:
    """The settings of `key_args` that decide how a startup goes (STARTUP_KEYS), a setting the log did not
    state taken at its default: engines print tp_size or a draft model when they are not the default, and a
    watch looks up history before the log has said everything."""
    return {k: args.get(k, default) for k, default in STARTUP_KEYS.items()}


def args_json(args: dict[str, Any]) -> str:
    """The one spelling of a set of arguments: the store matches past startups on it."""
    return json.dumps(args, sort_keys=True, separators=(",", ":"))


def host_of(source: str) -> str:
    """The machine the server ran on: the ssh host, else this one (a file, a container, a pod seen from here)."""
    try:
        spec = parse_source(source)
    except UsageError:
        spec = None
    if spec is not None and spec.kind == "ssh" and spec.host:
        return spec.host
    return socket.gethostname()


@dataclass(frozen=True)
class StoredPhase:
    name: str
    draft: bool = False
    start_offset_s: float | None = None  # from the start of the launch
    duration_s: float | None = None
    progress: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "draft": self.draft,
            "start_offset_s": self.start_offset_s,
            "duration_s": self.duration_s,
            "progress": self.progress,
        }


@dataclass(frozen=True)
class StoredStartup:
    started_at: float
    ended_at: float
    host: str
    source: str
    command: Command
    engine: str
    verdict: str
    engine_version: str | None = None
    model: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    elapsed_s: float | None = None
    time_to_ready_s: float | None = None
    root_cause: str | None = None
    root_cause_category: str | None = None
    ready_line_no: int | None = None
    phases: tuple[StoredPhase, ...] = ()
    id: int | None = None  # set once stored
    launch_key: str | None = None  # the same launch read twice has the same key (None: it cannot be told)
    caught_up: bool = False  # its start was read from the past at once: durations are the log's own or unknown

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "host": self.host,
            "source": self.source,
            "command": str(self.command),
            "engine": self.engine,
            "engine_version": self.engine_version,
            "model": self.model,
            "args": self.args,
            "verdict": self.verdict,
            "elapsed_s": self.elapsed_s,
            "time_to_ready_s": self.time_to_ready_s,
            "root_cause": self.root_cause,
            "root_cause_category": self.root_cause_category,
            "ready_line_no": self.ready_line_no,
            "caught_up": self.caught_up,
            "phases": [p.to_json() for p in self.phases],
        }


def phases_from_summary(raw: object) -> tuple[StoredPhase, ...]:
    """The summary's phases with their offsets from the launch's start. Phases follow one another (each ends
    where the next begins), so an offset is the sum of the durations before it; unknown once one is unknown."""
    out: list[StoredPhase] = []
    offset: float | None = 0.0
    for p in raw if isinstance(raw, list) else []:
        if not isinstance(p, dict) or not p.get("name"):
            continue
        duration = number(p.get("duration_s"))
        progress = number(p.get("progress"))
        out.append(StoredPhase(clean(p["name"], NAME_CAP), bool(p.get("draft")), offset, duration, progress))
        offset = None if offset is None or duration is None else round(offset + duration, 3)
    return tuple(out[:MAX_PHASES])


def _log_span(phases: tuple[StoredPhase, ...]) -> float | None:
    """From the launch's start to the end of its last phase, when every duration is known."""
    last = phases[-1] if phases else None
    if last is None or last.start_offset_s is None or last.duration_s is None:
        return None
    return round(last.start_offset_s + last.duration_s, 3)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def startup_from_summary(
    summary: dict[str, Any], source: str, command: str, now: float, launch_key: str | None = None
) -> StoredStartup:
    """The row for a startup that ended `now` (its summary's `elapsed_s` says when it began). A launch
    whose past a watch read at once (`caught_up`) is timed by the log's own clock: when it began by its first
    stamped line, how long by its phases; what its lines do not say stays unknown."""
    facts, failure, ready = _dict(summary.get("facts")), _dict(summary.get("failure")), _dict(summary.get("ready"))
    verdict = clean(summary.get("verdict") or "unknown", NAME_CAP)
    phases = phases_from_summary(summary.get("phases"))
    caught_up = summary.get("caught_up") is True
    # The verdict machine's figure (its ready time minus the launch's start, on the log's clock when it has one).
    to_ready = number(summary.get("time_to_ready_s")) if verdict == "ready" else None
    elapsed = number(summary.get("elapsed_s"))
    started_at, ended_at = now - (elapsed or 0.0), now
    if caught_up:
        # The watch's own elapsed time is not the startup's: the log's clock or nothing.
        elapsed = to_ready if verdict == "ready" else _log_span(phases)
        if (log_t := number(summary.get("launch_t"))) is not None:
            started_at = log_t
            ended_at = log_t + elapsed if elapsed is not None else now
    return StoredStartup(
        started_at=round(started_at, 3),
        ended_at=round(ended_at, 3),
        launch_key=launch_key,
        caught_up=caught_up,
        host=clean(host_of(source), TEXT_CAP),
        source=clean(source, TEXT_CAP),
        command=Command(command),
        engine=clean(summary.get("engine") or "unknown", NAME_CAP),
        verdict=verdict,
        engine_version=clean_opt(summary.get("engine_version"), NAME_CAP),
        model=clean_opt(facts.get("model"), TEXT_CAP),
        args=key_args(facts),
        elapsed_s=elapsed,
        time_to_ready_s=to_ready,
        root_cause=clean_opt(failure.get("text"), ROOT_CAUSE_CAP),
        root_cause_category=clean_opt(failure.get("category"), NAME_CAP),
        ready_line_no=line_no(ready.get("line_no")),
        phases=phases,
    )


__all__ = [
    "ARG_KEYS",
    "Command",
    "StoredPhase",
    "StoredStartup",
    "args_json",
    "clean",
    "host_of",
    "key_args",
    "startup_from_summary",
    "startup_shape",
]
