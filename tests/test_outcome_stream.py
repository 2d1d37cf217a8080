"""The event stream tells the summary's story: `ready`, `failed` and `state` come only from the verdict machine,
so a stream never says ready for a launch whose summary is not ready, and says it exactly once for one that is.

Every corpus log is replayed (`replay --speed 0`) through a real `Session`, in chunks with the loop turning
between them, so the machine looks at the log while it is still arriving, as it does live.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bootwatch.pipeline import Analyzer
from bootwatch.session import Options, Session
from bootwatch.sources.scripted import Pause, ScriptedSource, Step
from bootwatch.tracker.events import Event, LaunchEvent, ReadyEvent, StateEvent

from .conftest import corpus_labels
from .test_detection import SGLANG_QUIET_WARMUP_FAIL


class Capture:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def event(self, ev: Event, now: float) -> None:
        self.events.append(ev)

    def note(self, now: float, text: str) -> None:
        pass

    def close(self, summary: dict[str, Any], now: float) -> None:
        pass


def _chunks(data: bytes, rnd: random.Random) -> list[Step]:
    """The log in up to 12 pieces cut at line ends, the loop turning (a zero pause) between them."""
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    cuts = sorted(rnd.sample(ends[:-1], k=min(len(ends) - 1, 11))) if len(ends) > 1 else []
    steps: list[Step] = []
    for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
        steps += [data[a:b], Pause(0)]
    return steps


def replay(data: bytes, rnd: random.Random) -> tuple[list[Event], dict[str, Any]]:
    async def go() -> tuple[list[Event], dict[str, Any]]:
        sink = Capture()
        src = ScriptedSource(_chunks(data, rnd), hold_open=False)
        session = Session(Analyzer(), sink, Options(timeout_s=float("inf"), stall_s=None, replay=True))
        outcome = await session.run(src.chunks())
        return sink.events, session.summary(outcome)

    return asyncio.run(go())


def assert_tells_its_summary(events: list[Event], summary: dict[str, Any], name: str) -> None:
    launch_at = max((i for i, ev in enumerate(events) if isinstance(ev, LaunchEvent)), default=-1)
    ours = events[launch_at + 1 :]
    readies = [ev for ev in ours if isinstance(ev, ReadyEvent)]
    if summary["verdict"] == "ready":
        assert len(readies) == 1, (name, readies)
        assert readies[0].line_no == summary["ready"]["line_no"], name
    else:
        assert readies == [], (name, summary["verdict"], readies)
    states = [ev.state for ev in events if isinstance(ev, StateEvent)]
    assert states[-1:] == [summary["outcome"]] or (not states and summary["outcome"] == "starting"), (name, states)


def test_a_readiness_revoked_before_the_machine_took_it_is_never_said() -> None:
    # uvicorn said "startup complete", then SGLang's warm-up failed: the stream once said ready, then failed.
    events, summary = replay(SGLANG_QUIET_WARMUP_FAIL.encode(), random.Random(0))
    assert summary["verdict"] == "failed" and summary["outcome"] == "failed"
    assert [ev.kind for ev in events if ev.kind in ("ready", "failed", "state")] == ["failed", "state"]
    assert not any(ev.kind == "phase" and getattr(ev, "name", "") == "ready" for ev in events)


def test_the_issue_reproducer_replayed_at_speed_0_never_says_ready(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_text(SGLANG_QUIET_WARMUP_FAIL)
    out = subprocess.run(
        [sys.executable, "-m", "bootwatch", "replay", "--speed", "0", "--json", str(log)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    assert out.returncode == 1, out.stderr
    assert [x["event"] for x in lines if x["event"] in ("ready", "failed", "state", "summary")] == [
        "failed",
        "state",
        "summary",
    ]
    assert lines[-1]["outcome"] == "failed" and lines[-1]["ready"] is None


@pytest.mark.parametrize("label", corpus_labels(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_corpus_stream_contradicts_its_summary(label: Path) -> None:
    data = label.with_suffix(".log").read_bytes()
    events, summary = replay(data if data.endswith(b"\n") else data + b"\n", random.Random(label.stem))
    assert_tells_its_summary(events, summary, label.name)
