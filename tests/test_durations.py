"""Durations read from arguments and written for people."""

from __future__ import annotations

import pytest

from bootwatch.durations import fmt_duration, parse_duration
from bootwatch.errors import UsageError


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0.0, "0 ms"),
        (0.005, "5 ms"),
        (0.9994, "999 ms"),
        (0.9996, "1.0 s"),
        (4.24, "4.2 s"),
        (59.94, "59.9 s"),
        (187, "3m07s"),
        (3900, "1h05m"),
    ],
)
def test_durations_for_people(seconds: float | None, text: str) -> None:
    assert fmt_duration(seconds) == text


@pytest.mark.parametrize(
    ("arg", "seconds"), [("90s", 90.0), ("15m", 900.0), ("1h", 3600.0), ("250ms", 0.25), ("7", 7.0)]
)
def test_duration_arguments(arg: str, seconds: float) -> None:
    assert parse_duration(arg) == seconds


def test_a_bad_duration_says_how_to_write_one() -> None:
    with pytest.raises(UsageError, match="use 90s, 15m, 1h"):
        parse_duration("5q")
