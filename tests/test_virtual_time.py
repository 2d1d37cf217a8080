"""The virtual clock the fast live tests run on (tests/helpers/virtual_time.py): timers fire in order and at
their intervals, a live session's real-length stall passes in no real time, and its stamps are the clock's."""

from __future__ import annotations

import asyncio
import time

from bootwatch.pipeline import Analyzer
from bootwatch.session import Options, Session
from bootwatch.sinks.protocol import NullSink
from bootwatch.sources.scripted import Pause, ScriptedSource

from .helpers.virtual_time import EPOCH, VirtualClock

LINES = b"INFO 05-01 10:00:00 api_server.py:1] vLLM API server version 0.8.0\nINFO 05-01 10:00:01 loader.py:1] Loading weights\n"


def test_timers_fire_in_order_at_their_virtual_times() -> None:
    clock = VirtualClock()
    seen: list[tuple[str, float]] = []

    async def sleeper(name: str, s: float) -> None:
        await asyncio.sleep(s)
        seen.append((name, asyncio.get_running_loop().time()))

    async def go() -> None:
        await asyncio.gather(sleeper("late", 3600), sleeper("early", 0.5), sleeper("mid", 60))

    real = time.monotonic()
    clock.run(go())
    assert [n for n, _ in seen] == ["early", "mid", "late"]
    assert [round(t, 6) for _, t in seen] == [0.5, 60, 3600]
    assert time.monotonic() - real < 2
    assert clock.time() == EPOCH + 3600


def test_a_ten_minute_stall_is_judged_at_ten_minutes_in_no_real_time() -> None:
    clock = VirtualClock()

    async def go() -> tuple[str, dict]:
        src = ScriptedSource([LINES, Pause(5.0)])
        session = Session(Analyzer(clock="arrival"), NullSink(), Options(stall_s=600.0), source=src, clock=clock.time)
        outcome = await session.run(src.chunks())
        return outcome, session.summary(outcome)

    real = time.monotonic()
    outcome, summary = clock.run(go())
    assert outcome == "stalled" and summary["verdict"] == "stalled"
    assert 600 <= summary["elapsed_s"] < 620  # the stall time after the last line, at the session's own pace
    assert time.monotonic() - real < 5
