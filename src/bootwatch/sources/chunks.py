"""Cut a byte stream into chunks of complete lines, with memory bounded whatever the line lengths. A live reader
also hands on a \r progress bar's redraws before its newline (`updates`, `current`): chunks without a \n."""

from __future__ import annotations

import os
from collections.abc import Iterator

READ_SIZE = 1 << 20
# What a live reader hands on between two turns of the event loop. Analysing 16 KiB of the densest log
# (tracebacks, ~200 lines) takes ~35 ms on a slow core, so a stop signal waits no longer than that however fast the log
# grows; a reader that handed on 1 MiB blocks at a time kept Ctrl-C waiting while it fell behind.
PIECE = 16 << 10
MAX_LINE = 1 << 20  # a line longer than this keeps only its head and tail
KEEP = 64 << 10
# A run of one byte this long at the start of a cut line's kept tail is the filler that made the line over-long
# (copytruncate's NUL hole, a run of '=' or of anything with no newline): the tail starts after it.
FILL = 1 << 10


class LineChunker:
    """Push bytes in, get back bytes that end on a line boundary; the partial last line is held."""

    def __init__(self) -> None:
        self._partial = bytearray()
        self._tail = bytearray()  # the end of an over-long line, rolling
        self._long = False
        self._dropped = 0  # bytes of the current over-long line that were not kept
        self._bar = False  # the line being written has had \r updates: it is a progress bar
        self._shown = 0  # the head of the partial line already handed on by `current()`
        self.truncated_lines = 0

    def _grow(self, piece: bytes | memoryview) -> None:
        if not self._long:
            if len(self._partial) + len(piece) <= MAX_LINE:
                self._partial += piece
                return
            # Over-long: keep the head (where the message starts) and a rolling tail (the latest state
            # of a \r progress bar); drop the middle.
            self._long = True
            rest = bytes(self._partial[KEEP:]) + bytes(piece)
            del self._partial[KEEP:]
            self._dropped += max(0, len(rest) - KEEP)
            self._tail = bytearray(rest[-KEEP:])
            return
        self._tail += piece
        if len(self._tail) > KEEP:
            self._dropped += len(self._tail) - KEEP
            del self._tail[: len(self._tail) - KEEP]

    def _take_line(self) -> bytes:
        if self._long:
            self.truncated_lines += 1
            tail = bytes(self._tail)
            run = len(tail) - len(tail.lstrip(tail[:1]))
            if run >= FILL:
                tail, self._dropped = tail[run:], self._dropped + run
            # The tail is a segment of its own (what a \r redraw is): the message that ends the run (the banner
            # after a NUL hole, a bar's latest state) is read as a line from its start, as it would be after 300 KB.
            line = bytes(self._partial) + f" [... bootwatch cut {self._dropped} bytes ...]\r".encode() + tail
        else:
            line = bytes(self._partial)
        self._partial.clear()
        self._tail.clear()
        self._long = False
        self._dropped = 0
        self._bar = False
        return line

    def push(self, data: bytes) -> bytes:
        if self._shown and data:
            # `current()` handed on the bar's state so far: if a redraw or the line's end comes next, it was
            # complete and is not handed on again; if the bar's own bytes go on, it was cut, and goes again whole.
            if data[:1] in (b"\r", b"\n"):
                del self._partial[: self._shown]
            self._shown = 0
        first = data.find(b"\n")
        if first < 0:
            self._grow(data)
            return b""
        last = data.rfind(b"\n")
        self._grow(memoryview(data)[:first])
        head = self._take_line()
        self._grow(memoryview(data)[last + 1 :])
        if first == last:
            return head + b"\n"
        return head + data[first : last + 1]

    def held(self) -> tuple[bytes, int]:
        """The partial last line as held (an over-long one's head), and how many bytes of input it stands for
        (its dropped middle and rolling tail included): where a reader that stops here must resume."""
        size = len(self._partial) + (len(self._tail) + self._dropped if self._long else 0)
        return bytes(self._partial), size

    def updates(self) -> bytes:
        """The \r-ended updates of the line still being written (a tqdm bar redrawing itself), taken out of the
        held partial line: a live reader hands them on as they arrive, and the rest of the line follows with
        its newline. b"" when there are none (or the line is over-long: its head and tail are kept instead)."""
        if self._long:
            return b""
        cut = self._partial.rfind(b"\r")
        if cut < 0:
            return b""
        out = bytes(self._partial[: cut + 1])
        del self._partial[: cut + 1]
        self._bar = True
        return out

    def current(self) -> bytes:
        """A progress bar's latest state, after its last \r, handed on once the reader has read all there is (the
        next redraw may be a shard's load away), with a \r after it as the updates have. Only for a line that is a
        bar (it had \r updates): any other partial line waits for its newline."""
        if not self._bar or self._long or self._shown or not self._partial:
            return b""
        self._shown = len(self._partial)
        return bytes(self._partial) + b"\r"

    def flush(self) -> bytes:
        """End of input: the last line, even without a newline."""
        if not self._partial and not self._long:
            return b""
        return self._take_line() + b"\n"

    @property
    def pending(self) -> int:
        return len(self._partial) + len(self._tail)


def pieces(data: bytes, size: int = PIECE) -> Iterator[bytes]:
    """`data` (complete lines) cut at line ends into pieces of about `size` (a longer line stays whole)."""
    n = len(data)
    if n <= size:
        if data:
            yield data
        return
    start = 0
    while start < n:
        if n - start <= size:
            yield data[start:]
            return
        cut = data.rfind(b"\n", start, start + size)
        if cut < 0:
            cut = data.find(b"\n", start + size)
            if cut < 0:
                yield data[start:]
                return
        yield data[start : cut + 1]
        start = cut + 1


def newlines_before(fd: int, end: int) -> int:
    """Newlines in the first `end` bytes of the open file (read with pread: its offset is left as it is). Line
    numbers count from the top of a file, what the file (and `report`) says."""
    n = pos = 0
    while pos < end:
        block = os.pread(fd, min(READ_SIZE * 4, end - pos), pos)
        if not block:
            break
        n += block.count(b"\n")
        pos += len(block)
    return n
