"""The reattach de-duplicator on its own: after `docker logs --since` / `kubectl logs --since-time` resumes
from the last timestamp had, the lines had at that stamp come again and must be dropped, once each."""

from __future__ import annotations

import itertools

import pytest

from bootwatch.sources.dedup import ReattachDedup

T0 = "2026-01-01T00:00:00.000000000Z"
T1 = "2026-01-01T00:00:01.000000000Z"
T2 = "2026-01-01T00:00:02.000000000Z"


def stamped(ts: str, msg: str) -> bytes:
    return f"{ts} {msg}\n".encode()


def stream(lines: list[bytes]) -> bytes:
    return b"".join(lines)


# Several lines share a stamp, one of them twice: the repeats a resume from a stamp gives back.
LOG = [
    stamped(T0, "start"),
    stamped(T0, "loading"),
    stamped(T1, "shard 1/2"),
    stamped(T1, "shard 1/2"),
    stamped(T1, "shard 2/2"),
    stamped(T2, "ready"),
]
MESSAGES = b"".join(line.partition(b" ")[2] for line in LOG)


def resend_from(since: str | None, cut: int = len(LOG)) -> list[bytes]:
    """What the runtime sends on a resume: every line from `since` on (it has no finer position), the stream
    ending after LOG[cut - 1]."""
    return [line for line in LOG[:cut] if since is None or line.decode() >= since]


def test_a_first_stream_passes_everything_without_stamps() -> None:
    d = ReattachDedup()
    assert d.filter(stream(LOG)) == MESSAGES
    assert d.since == T2


def test_the_lines_had_at_the_last_stamp_are_dropped_and_the_rest_kept() -> None:
    d = ReattachDedup.resuming(T1, [stamped(T1, "shard 1/2")])
    out = d.filter(stream(resend_from(T1)))
    assert out == b"shard 1/2\nshard 2/2\nready\n"  # one of the two identical lines was had, the other not


def test_lines_before_the_resume_stamp_are_dropped() -> None:
    d = ReattachDedup.resuming(T1, [])
    assert d.filter(stamped(T0, "late repeat") + stamped(T1, "new")) == b"new\n"


def test_a_line_without_a_stamp_is_passed_whole() -> None:
    d = ReattachDedup.resuming(T1, [stamped(T1, "x")])
    assert d.take(b"unstamped\n") == b"unstamped\n"
    assert d.since == T1


def test_a_progress_bar_carriage_return_stays_in_its_line() -> None:
    d = ReattachDedup()
    assert d.filter(stamped(T0, "10%\r50%\r100%")) == b"10%\r50%\r100%\n"


def test_a_new_stamp_forgets_what_was_had_at_the_old_one() -> None:
    d = ReattachDedup()
    d.filter(stream(LOG[:3]))
    assert d.since == T1 and d.seen_at_since == {stamped(T1, "shard 1/2"): 1}


def test_a_stream_that_resends_nothing_loses_nothing() -> None:
    d = ReattachDedup.resuming(T1, [stamped(T1, "shard 1/2")])
    assert d.filter(stamped(T2, "ready")) == b"ready\n"


@pytest.mark.parametrize("cut", range(len(LOG) + 1))
def test_any_cut_then_resume_gives_each_message_once(cut: int) -> None:
    d = ReattachDedup()
    first = d.filter(stream(LOG[:cut])) if cut else b""
    d.reattached()
    again = d.filter(stream(resend_from(d.since)))
    assert first + again == MESSAGES


def test_several_resumes_in_a_row_give_each_message_once() -> None:
    for cuts in itertools.combinations(range(1, len(LOG)), 2):
        d, out = ReattachDedup(), b""
        for cut in (*cuts, len(LOG)):
            d.reattached()
            out += d.filter(stream(resend_from(d.since, cut)))
        assert out == MESSAGES, cuts
