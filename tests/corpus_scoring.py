"""How bootwatch's report compares with a labelled real log: the one judgement that the corpus test and the
blind-score script (scripts/score-corpus) share."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bootwatch.lines import Normalizer
from bootwatch.lines.ansi import strip_ansi
from bootwatch.pipeline import analyze_path

# The shell loop bootwatch replaces (the brief's seed): ready on "fired up", failed on any of these words.
_GREP_READY = re.compile(r"fired up")
_GREP_FAILED = re.compile(r"RuntimeError|Traceback.*most recent|CUDA error|ValueError", re.IGNORECASE)


def message(line: str) -> str:
    """A physical line's message without its prefix (the SPEC lets failure.text drop the prefix)."""
    return Normalizer(2025).lines(1, line)[-1].text.strip()


def log_text(log: Path) -> str:
    """The log as text: UTF-16 when it starts with a byte-order mark (a Windows PowerShell capture), else UTF-8."""
    data = log.read_bytes()
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16")
    return data.decode("utf-8", "replace")


def physical_lines(log: Path) -> list[str]:
    return [strip_ansi(x) for x in log_text(log).split("\n")]


@dataclass
class Judgement:
    label: Path
    want: dict[str, Any]
    got: dict[str, Any]
    verdict_ok: bool
    cause_ok: bool | None  # None: the log did not fail
    ready_ok: bool | None  # None: the log did not become ready
    engine_ok: bool
    grep_verdict: str

    @property
    def ok(self) -> bool:
        return self.verdict_ok and self.cause_ok is not False and self.ready_ok is not False

    def why(self) -> str:
        f, r = self.got.get("failure") or {}, self.got.get("ready") or {}
        return (
            f"want {self.want['outcome']} got {self.got['verdict']} (engine {self.got['engine']}); "
            f"failure={f.get('line_no')}:{str(f.get('text'))[:100]!r} ready={r.get('line_no')}:"
            f"{str(r.get('text'))[:60]!r}; want cause={str(self.want.get('root_cause_line'))[:100]!r}"
        )


def grep_loop_verdict(log: Path) -> str:
    text = strip_ansi(log_text(log))
    if _GREP_READY.search(text):
        return "ready"
    if _GREP_FAILED.search(text):
        return "failed"
    return "incomplete"


def judge(label: Path) -> Judgement:
    want = json.loads(label.read_text())
    log = label.with_suffix(".log")
    got = analyze_path(log)
    lines = physical_lines(log)
    verdict_ok = got["verdict"] == want["outcome"]
    cause_ok = ready_ok = None
    if want["outcome"] == "failed":
        f = got.get("failure")
        cause_ok = (
            bool(f)
            and message(f["text"]) == message(want["root_cause_line"])
            and (f["line_no"] is not None and f["text"] in lines[f["line_no"] - 1])
        )
    elif got.get("failure") is not None:
        verdict_ok = False
    if want["outcome"] == "ready":
        # A server that loads models on demand (Ollama) is ready for the corpus at its latest load, which the
        # summary says beside the launch's readiness (the first load's, which the event stream said)
        r = (got.get("model_loads") or {}).get("last") or got.get("ready")
        ready_ok = (
            bool(r)
            and r["text"] == message(want["ready_line"])
            # the physical line, outer whitespace aside (a label holds it stripped, as corpus-agreement compares)
            and (lines[r["line_no"] - 1].strip() == want["ready_line"].strip())
        )
    elif got.get("ready") is not None:
        verdict_ok = False
    # A generic FastAPI/uvicorn server (corpus folder uvicorn/) is what bootwatch calls "unknown".
    engine_ok = got["engine"] == want["engine"] or (want["engine"] == "uvicorn" and got["engine"] == "unknown")
    return Judgement(label, want, got, verdict_ok, cause_ok, ready_ok, engine_ok, grep_loop_verdict(log))
