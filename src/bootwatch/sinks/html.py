"""A startup timeline as one self-contained HTML file: a Gantt chart of phases per startup, side by side on
one time scale, failures marked with their root cause. Inline CSS and SVG only: no script, no font, no
fetch (it opens offline, and a log's text in it can do nothing). Every text from a log is escaped."""

from __future__ import annotations

import hashlib
import html
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from bootwatch.durations import fmt_duration
from bootwatch.store import StoredPhase, StoredStartup

LABEL_W = 360
CHART_W = 760
ROW_H = 30
CAUSE_H = 18
AXIS_H = 28
PHASE_COLORS = {
    "start": "#9aa5b1",
    "config": "#c3b1e1",
    "download": "#6fa8dc",
    "distributed_init": "#8e7cc3",
    "load_weights": "#3d85c6",
    "load_draft": "#76a5af",
    "compile": "#e69138",
    "cuda_graph": "#f1c232",
    "kv_cache": "#6aa84f",
    "warmup": "#93c47d",
    "tokenizer": "#a2c4c9",
    "server": "#b4a7d6",
}
VERDICT_COLORS = {
    "ready": "#2e7d32",
    "failed": "#c62828",
    "stalled": "#ef6c00",
    "timeout": "#ef6c00",
    "incomplete": "#757575",
}
CAUSE_CAP = 120  # what fits under the chart; the table below has all of it


def _e(value: object) -> str:
    """Any text on the page: secrets masked, control and bidi characters shown as escapes (a U+202E must not
    reorder what a reader sees), then HTML-escaped. Line breaks stay line breaks."""
    from bootwatch.text import shown

    text = "" if value is None else str(value)
    return html.escape("\n".join(shown(part) for part in text.split("\n")), quote=True)


def _color(name: str) -> str:
    if name in PHASE_COLORS:
        return PHASE_COLORS[name]
    hue = int(hashlib.sha1(name.encode()).hexdigest()[:4], 16) % 360  # stable across files
    return f"hsl({hue},45%,60%)"


@dataclass(frozen=True)
class Bar:
    name: str
    draft: bool
    start_s: float
    duration_s: float
    open_ended: bool  # the startup ended (failed, stalled) in this phase: its length is up to the end


def bars(s: StoredStartup) -> tuple[list[Bar], float]:
    """The phases as bars on the startup's own clock, and where it ended."""
    out: list[Bar] = []
    offset = 0.0
    end = _end_s(s)
    for i, p in enumerate(s.phases):
        if p.name == "ready":
            continue
        start = p.start_offset_s if p.start_offset_s is not None else offset
        dur, open_ended = p.duration_s, False
        if dur is None:
            dur, open_ended = _until_the_end(s.phases[i + 1 :], start, end), True
            if dur is None:
                continue
        out.append(Bar(p.name, p.draft, start, max(dur, 0.0), open_ended))
        offset = start + dur
    finish = max([end or 0.0, *(b.start_s + b.duration_s for b in out)])
    return out, finish


def _end_s(s: StoredStartup) -> float | None:
    """Where the startup ended on its own clock: at readiness when it got there."""
    return s.time_to_ready_s if s.verdict == "ready" and s.time_to_ready_s is not None else s.elapsed_s


def _until_the_end(rest: Sequence[StoredPhase], start: float, end: float | None) -> float | None:
    """A phase with no duration of its own: the startup ended in it when only ready (if anything) came after,
    and then it lasts until the end; else it has no bar."""
    last = all(q.name == "ready" for q in rest)
    if not last or end is None or end <= start:
        return None
    return end - start


def _step(span: float) -> float:
    for step in (0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200):
        if span / step <= 10:
            return float(step)
    return 14400.0


def _label(s: StoredStartup) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.started_at))
    ident = f"#{s.id} " if s.id is not None else ""
    engine = s.engine + (f" {s.engine_version}" if s.engine_version else "")
    return f"{ident}{when} · {engine}"


def _svg(startups: Sequence[StoredStartup]) -> str:
    laid = [(s, *bars(s)) for s in startups]
    span = max([f for _, _, f in laid] + [1.0])
    scale = CHART_W / span
    heights = [ROW_H + (CAUSE_H if _shows_cause(s) else 0) for s in startups]
    total_h = AXIS_H + sum(heights) + 10
    w = LABEL_W + CHART_W + 110  # room for the end mark and the total after the longest bar
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{total_h}" '
        f'viewBox="0 0 {w} {total_h}" role="img" aria-label="startup timeline">'
    ]
    parts += _axis(span, scale, total_h)
    y = AXIS_H
    for (s, bs, finish), h in zip(laid, heights, strict=True):
        parts.append(_row_label(s, y))
        parts += [_bar(b, y, scale) for b in bs]
        parts.append(_end_mark(s, finish, y, scale))
        if _shows_cause(s):
            parts.append(_cause(s, y))
        y += h
    parts.append("</svg>")
    return "".join(parts)


def _shows_cause(s: StoredStartup) -> bool:
    return bool(s.root_cause and s.verdict != "ready")


def _axis(span: float, scale: float, total_h: int) -> list[str]:
    """A grid line and its time every step, the whole height down."""
    step = _step(span)
    parts = []
    tick = 0.0
    while tick <= span + 1e-9:
        x = LABEL_W + tick * scale
        parts.append(
            f'<line x1="{x:.1f}" y1="{AXIS_H - 6}" x2="{x:.1f}" y2="{total_h}" class="grid"/>'
            f'<text x="{x:.1f}" y="{AXIS_H - 10}" class="tick">{_e(fmt_duration(tick))}</text>'
        )
        tick += step
    return parts


def _row_label(s: StoredStartup, y: int) -> str:
    model = s.model or ""
    model = model if len(model) <= 56 else "…" + model[-55:]  # a path's end names the model
    return (
        f'<text x="4" y="{y + 13}" class="label">{_e(_label(s))}</text>'
        f'<text x="4" y="{y + 26}" class="model">{_e(model)}</text>'
    )


def _bar(b: Bar, y: int, scale: float) -> str:
    x, bw = LABEL_W + b.start_s * scale, max(b.duration_s * scale, 1.5)
    name = ("draft " if b.draft else "") + b.name
    tip = f"{name}: {fmt_duration(b.duration_s)}" + (" (until the end)" if b.open_ended else "")
    cls = "bar open" if b.open_ended else "bar"
    inside = f'<text x="{x + 4:.1f}" y="{y + 18}" class="inbar">{_e(name)}</text>' if bw > 8 * len(name) + 8 else ""
    return (
        f'<g><title>{_e(tip)}</title><rect x="{x:.1f}" y="{y + 3}" width="{bw:.1f}" '
        f'height="{ROW_H - 8}" rx="2" fill="{_color(b.name)}" class="{cls}"/>{inside}</g>'
    )


def _end_mark(s: StoredStartup, finish: float, y: int, scale: float) -> str:
    """✓ or ✕ where the startup ended, with how long it took."""
    end_x = LABEL_W + finish * scale
    mark = "✓" if s.verdict == "ready" else "✕"
    took = f" {fmt_duration(finish)}" if finish else ""
    return f'<text x="{end_x + 4:.1f}" y="{y + 19}" fill="{_verdict_color(s)}" class="mark">{mark}{_e(took)}</text>'


def _cause(s: StoredStartup, y: int) -> str:
    """The root cause under the row, cut to what fits."""
    root = s.root_cause or ""
    cause = root if len(root) <= CAUSE_CAP else root[: CAUSE_CAP - 1] + "…"
    cat = f"[{s.root_cause_category}] " if s.root_cause_category else ""
    return (
        f'<text x="{LABEL_W}" y="{y + ROW_H + 10}" fill="{_verdict_color(s)}" class="cause">'
        f"{_e(s.verdict.upper())}: {_e(cat)}{_e(cause)}</text>"
    )


def _verdict_color(s: StoredStartup) -> str:
    return VERDICT_COLORS.get(s.verdict, "#757575")


def _legend(startups: Sequence[StoredStartup]) -> str:
    names: list[str] = []
    for s in startups:
        for p in s.phases:
            if p.name != "ready" and p.name not in names:
                names.append(p.name)
    return "".join(
        f'<span class="key"><span class="sw" style="background:{_color(n)}"></span>{_e(n)}</span>' for n in names
    )


def _table(startups: Sequence[StoredStartup]) -> str:
    rows = []
    for s in startups:
        took = _end_s(s)
        phases = " ".join(
            f"{p.name}={fmt_duration(p.duration_s)}" for p in s.phases if p.duration_s is not None and p.name != "ready"
        )
        rows.append(
            f'<tr><td class="id">{_e(s.id if s.id is not None else "")}</td><td>{_e(_label(s))}</td>'
            f'<td>{_e(s.model)}</td><td class="v-{_e(s.verdict)}">{_e(s.verdict)}</td>'
            f"<td>{_e(fmt_duration(took))}</td><td>{_e(phases)}</td><td>{_e(s.source)}</td>"
            f"<td>{_e(s.root_cause)}</td></tr>"
        )
    return (
        "<table><thead><tr><th>id</th><th>started</th><th>model</th><th>outcome</th><th>to ready</th>"
        "<th>phases</th><th>source</th><th>root cause</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


CSS = """
body{font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:17px;margin:0 0 4px} .sub{color:#666;margin-bottom:10px}
.grid{stroke:#e3e3e3;stroke-width:1} .tick{font-size:10px;fill:#777;text-anchor:middle}
.label{font-size:12px;fill:#222} .model{font-size:10px;fill:#777} .inbar{font-size:10px;fill:#fff}
.bar{stroke:#fff;stroke-width:.5} .open{opacity:.55;stroke:#c62828;stroke-dasharray:3 2;stroke-width:1}
.mark{font-size:12px;font-weight:bold} .cause{font-size:11px}
.key{display:inline-block;margin:0 12px 6px 0} .sw{display:inline-block;width:11px;height:11px;margin-right:4px;
vertical-align:-1px;border-radius:2px}
table{border-collapse:collapse;margin-top:14px;font-size:12px} td,th{border-bottom:1px solid #eee;padding:3px 8px;
text-align:left;vertical-align:top;max-width:520px;overflow-wrap:anywhere} th,td.id{white-space:nowrap}
.v-ready{color:#2e7d32} .v-failed{color:#c62828} .v-stalled,.v-timeout{color:#ef6c00}
"""


def timeline_html(startups: Sequence[StoredStartup], title: str) -> str:
    """The page: a title, the legend, the chart (one row per startup, one time scale) and a table."""
    if startups:
        body = f'<div class="legend">{_legend(startups)}</div>{_svg(startups)}{_table(startups)}'
    else:
        body = "<p>No startups to show.</p>"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
        f'<h1>{_e(title)}</h1><div class="sub">{len(startups)} startup(s), phases on one time scale; '
        "hover a bar for its duration. Generated by bootwatch.</div>"
        f"{body}</body></html>\n"
    )


def write_timeline(path: str, startups: Sequence[StoredStartup], title: str) -> None:
    """Write the page; a path that cannot be written is a clear one-line UsageError."""
    from bootwatch.errors import UsageError

    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(timeline_html(startups, title))
    except OSError as e:
        raise UsageError(f"--html {path}: cannot write it ({e.strerror or e})") from None


def report_timeline(path: str, summary: dict[str, Any], log: str) -> None:
    """`report --html`: the one startup the log holds, on its own clock."""
    from bootwatch.store import startup_from_summary

    startup = startup_from_summary(summary, log, "watch", time.time())
    log_t = summary.get("launch_t")
    if isinstance(log_t, int | float):
        # When it started by the log's own clock, not when the report was made.
        took = startup.time_to_ready_s if startup.time_to_ready_s is not None else _end_s(startup)
        startup = replace(startup, started_at=float(log_t), ended_at=float(log_t) + (took or 0.0))
    write_timeline(path, [startup], f"bootwatch: {log}")


__all__ = ["bars", "report_timeline", "timeline_html", "write_timeline"]
