"""A model test of the file follower, in the manner of Vector's file-watcher experiment: random writes,
rotations, replacements, deletions, truncations and in-place rewrites, with pauses and reads, drive the real
`FileFollower` on real files and a model beside it.

The model knows each *incarnation* of the log: a file's content from its creation (or its last truncation
or rewrite) on. Every line is unique (its incarnation and number), so what the follower reads can be checked
against what was written:
- nothing is read that was not written as a whole line, nothing twice, and each incarnation in order (but
  for a torn line: the head of a line the follower had read when a truncation or rewrite took the rest);
- at each read (the follower let run until it waits again), every line of the file at the path and of the
  file the follower was on at the previous read has been read. Lines that a truncation, rewrite or a second
  rotation removed before the follower could look are the only ones it may miss (as `tail -F` does).

A second run starts every file with the same first line (longer than the follower's 256-byte fingerprint
of the head, as llama.cpp's untimed first lines are): a truncation or rewrite then keeps the head, and only
the bytes before the offset the follower holds tell it that the file is another one.

The follower runs in the same event loop and only between the test's awaits, so every file operation is
atomic for it, and a read is exact: its stat poll is due before the test's own sleep ends.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bootwatch.sources.file import FileFollower

POLL_S = 0.002
READ_S = POLL_S * 4  # past the follower's next poll: it has read all there is and waits again


@dataclass
class Incarnation:
    """One content of the log: from its creation, truncation or rewrite until the next."""

    id: int
    lines: list[bytes] = field(default_factory=list)
    alive: bool = True  # still holds its lines (a truncation or rewrite ends it)


# ---- actions ------------------------------------------------------------------------------------------
write = st.tuples(st.just("write"), st.integers(1, 4), st.integers(0, 300), st.booleans())  # n, pad, split
rotate = st.tuples(st.just("rotate"), st.sampled_from(["rename", "delete", "replace"]), st.integers(0, 3))
truncate = st.tuples(st.just("truncate"))
rewrite = st.tuples(st.just("rewrite"), st.integers(1, 4), st.integers(0, 300))
pause = st.tuples(st.just("pause"), st.sampled_from([0.0, POLL_S / 2, POLL_S * 2]))
read = st.tuples(st.just("read"))
# The same first line in every file, longer than the follower's fingerprint of the head.
HEADER = b"warning: not compiled with GPU offload support, --gpu-layers option will be ignored " * 4


def _padding(inc: int, size: int) -> bytes:
    """Padding that names its incarnation: two files never hold the same bytes past their common head."""
    return (f"{inc}." * size).encode()[:size]


actions = st.lists(st.one_of(write, write, rotate, truncate, rewrite, pause, read), max_size=30)


class Model:
    def __init__(self, path: Path, headed: bool = False) -> None:
        self.path = path
        self.headed = headed  # every content starts with HEADER
        self.incs: list[Incarnation] = []
        self.at_path: Incarnation | None = None  # the content of the file at the path now
        self.held: Incarnation | None = None  # the file the follower was on at the last read
        self.rotated = 0

    def _new(self) -> Incarnation:
        inc = Incarnation(len(self.incs))
        self.incs.append(inc)
        return inc

    def _lines(self, inc: Incarnation, n: int, pad: int) -> list[bytes]:
        start = len(inc.lines)
        new = [f"inc{inc.id} line{start + i} ".encode() + _padding(inc.id, (pad * (i + 1)) % 301) for i in range(n)]
        inc.lines += new
        return new

    def _data(self, inc: Incarnation, n: int, pad: int) -> bytes:
        """The next `n` lines of `inc` as bytes, after HEADER if they are its first."""
        head = HEADER + b"\n" if self.headed and not inc.lines else b""
        return head + b"".join(line + b"\n" for line in self._lines(inc, n, pad))

    async def write(self, n: int, pad: int, split: bool) -> None:
        if self.at_path is None:
            self.at_path = self._new()
        data = self._data(self.at_path, n, pad)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if split:  # a line in two writes, the follower let run in between: it must join them
                cut = len(data) // 2 or 1
                os.write(fd, data[:cut])
                await asyncio.sleep(POLL_S * 2)
                os.write(fd, data[cut:])
            else:
                os.write(fd, data)
        finally:
            os.close(fd)

    def rotate(self, how: str, n: int) -> None:
        if self.at_path is None:
            return
        if how == "rename":
            self.rotated += 1
            self.path.rename(self.path.with_name(f"{self.path.name}.{self.rotated}"))
            self.at_path = None
        elif how == "delete":
            self.path.unlink()
            self.at_path = None
        else:  # another file renamed over it, with its first lines already in it
            tmp = self.path.with_name("incoming.tmp")
            self.at_path = inc = self._new()
            tmp.write_bytes(self._data(inc, n, 7))
            os.replace(tmp, self.path)

    def truncate(self) -> None:
        if self.at_path is None:
            return
        os.truncate(self.path, 0)
        self.at_path.alive = False
        self.at_path = self._new()

    def rewrite(self, n: int, pad: int) -> None:
        # the same inode written again from its start, possibly past the old size, before the follower looks
        if self.at_path is None:
            return
        self.at_path.alive = False
        self.at_path = inc = self._new()
        with self.path.open("r+b" if self.path.exists() else "wb") as f:
            f.truncate(0)
            f.write(self._data(inc, n, pad))

    def must_have_read(self) -> list[bytes]:
        out: list[bytes] = []
        for inc in (self.held, self.at_path):
            if inc is not None and inc.alive:
                out += inc.lines
        return out

    def after_read(self) -> None:
        if self.at_path is not None:
            self.held = self.at_path


def check(model: Model, got: list[bytes], at_read: bool) -> None:
    written = {line: (inc.id, i) for inc in model.incs for i, line in enumerate(inc.lines)}
    seen: set[bytes] = set()
    last: dict[int, int] = {}
    for line in got:
        if model.headed and HEADER.startswith(line):
            continue  # every file's first line (or the head of it, torn): not one line of one incarnation
        if line not in written:
            # A torn line: the follower had read the head of a line when a truncation or rewrite took the
            # rest away. It passes on what it had (its bytes are the log's) rather than lose it, once, and
            # only for content that was cut: a rotated or deleted file is read to its end first.
            torn = [
                (inc.id, i)
                for inc in model.incs
                if not inc.alive
                for i, whole in enumerate(inc.lines)
                if whole.startswith(line)
            ]
            torn = [(inc, i) for inc, i in torn if i > last.get(inc, -1)]  # the next line of its incarnation
            assert torn, f"read a line never written, or out of order: {line[:60]!r}"
            inc, i = torn[0]
            last[inc] = len(written)  # nothing more of that incarnation after it
            continue
        assert line not in seen, f"read twice: {line[:60]!r}"
        seen.add(line)
        inc, i = written[line]
        assert i > last.get(inc, -1), f"out of order in incarnation {inc}: {line[:60]!r}"
        last[inc] = i
    if at_read:
        missing = [line for line in model.must_have_read() if line not in seen]
        assert not missing, f"not read by now: {[m[:40] for m in missing]}"


async def play(directory: Path, steps: list[tuple], headed: bool = False) -> None:  # type: ignore[type-arg]
    model = Model(directory / "server.log", headed)
    follower = FileFollower(model.path, poll_s=POLL_S, events=False)
    got: list[bytes] = []

    async def consume() -> None:
        async for chunk in follower.chunks():
            got.extend(chunk.splitlines())

    task = asyncio.create_task(consume())
    try:
        for step in [*steps, ("read",)]:
            match step:
                case ("write", n, pad, split):
                    await model.write(n, pad, split)
                case ("rotate", how, n):
                    model.rotate(how, n)
                case ("truncate",):
                    model.truncate()
                case ("rewrite", n, pad):
                    model.rewrite(n, pad)
                case ("pause", s):
                    await asyncio.sleep(s)
                case ("read",):
                    await asyncio.sleep(READ_S)
                    assert not task.done(), task.exception()
                    check(model, got, at_read=True)
                    model.after_read()
            check(model, got, at_read=False)
    finally:
        task.cancel()
        follower.close()
        await asyncio.gather(task, return_exceptions=True)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions)
def test_every_complete_line_of_each_file_is_read_exactly_once(steps: list[tuple]) -> None:  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as d:
        asyncio.run(play(Path(d), steps))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions)
def test_a_rewrite_that_keeps_the_first_bytes_is_seen(steps: list[tuple]) -> None:  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as d:
        asyncio.run(play(Path(d), steps, headed=True))
