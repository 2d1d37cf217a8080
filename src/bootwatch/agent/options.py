"""The bounded wait's options, shared by `watch` and `run`."""

from __future__ import annotations

import argparse

from bootwatch.durations import parse_duration


def add_wait_options(c: argparse.ArgumentParser) -> None:
    c.add_argument(
        "--wait-at-most",
        type=parse_duration,
        metavar="DUR",
        help="return after DUR with exit 3 'still starting' and where the startup stands (phase, progress, ETA, "
        "last line, whether it moved), without judging it and without stopping anything; ready and failed "
        "return at once. A repeat call continues where the last one stopped (run: needs --detach)",
    )
    c.add_argument(
        "--wait-state",
        metavar="FILE",
        help="where --wait-at-most keeps what the next call resumes from "
        "(default: one file per source in XDG_STATE_HOME/bootwatch/waits, or BOOTWATCH_HOME/waits)",
    )
