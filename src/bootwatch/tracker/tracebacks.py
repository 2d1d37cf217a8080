"""Assemble Python tracebacks structurally, one per process, even when processes interleave.

A traceback starts at a message that ends with `Traceback (most recent call last):` (SGLang prints it
after `Scheduler hit an exception: `, vLLM after its log prefix), goes on with indented frames, may chain
(`During handling of the above exception…`), and ends at its first non-indented exception line. vLLM
repeats its prefix on every traceback line, so those lines are matched by process; SGLang's and plain
Python's frames carry no prefix at all, so bare lines go to the traceback that is open and takes them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bootwatch.lines import Line

HEADER = "Traceback (most recent call last):"
_CHAIN = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
# "KeyError: 'x'", "torch.OutOfMemoryError: CUDA out of memory…", "asyncio.exceptions.CancelledError"
EXC_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:: .*|:)?$")
EXC_NAME = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)")
_INNER_EXC = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)\(.*\)$")
_MAX_KEEP = 40  # context lines kept per traceback: memory stays bounded for tracebacks of any length
_MAX_STRAY = 60  # unrelated bare lines tolerated inside an open traceback before it is dropped


def is_header(text: str) -> bool:
    return text.endswith(HEADER) and not text[:1].isspace()


@dataclass
class Traceback:
    proc: str | None
    header_no: int
    header: str  # the message that carried the header, e.g. "Scheduler hit an exception: Traceback …"
    t: float | None
    takes_bare: bool = True  # frames come without a prefix (SGLang, plain Python)
    exceptions: list[tuple[int, str]] = field(default_factory=list)  # (line_no, text), chain order
    context: list[str] = field(default_factory=list)
    state: str = "frames"  # frames -> linger (after an exception line) -> chain (after a chain marker)
    last_assert: tuple[int, str] | None = None  # the `assert …` source line a bare AssertionError comes from
    idle: int = 0  # lines seen in linger/chain state, or stray lines in frames state
    # exception line -> its indented continuation (line number, text)
    details: dict[int, tuple[int, str]] = field(default_factory=dict)

    def keep(self, raw: str) -> None:
        self.context.append(raw)
        if len(self.context) > _MAX_KEEP:
            del self.context[6]  # keep the head (where it started) and the tail (where it ended)


class TracebackAssembler:
    """Feeds lines to open tracebacks; hands each traceback back once, at its first exception line."""

    def __init__(self) -> None:
        self.open: list[Traceback] = []

    @property
    def busy(self) -> bool:
        return bool(self.open)

    def _owner(self, line: Line) -> Traceback | None:
        bare = line.proc is None and line.fmt is None
        for tb in reversed(self.open):
            if bare:
                if tb.takes_bare:
                    return tb
            elif tb.proc == line.proc:
                return tb
        return None

    def start(self, line: Line) -> None:
        owner = self._owner(line)
        if owner is not None and owner.state == "chain":
            owner.state, owner.idle = "frames", 0
            owner.keep(line.raw)
            return
        if owner is not None and owner.state == "linger" and owner.proc == line.proc:
            self.open.remove(owner)
        tb = Traceback(line.proc, line.no, line.text, line.t)
        tb.keep(line.raw)
        self.open.append(tb)

    def feed(self, line: Line) -> tuple[bool, Traceback | None]:
        """Offer a non-header line: (consumed, traceback whose first exception line this was)."""
        tb = self._owner(line)
        if tb is None:
            return False, None
        if line.proc is not None and line.fmt is not None:
            tb.takes_bare = False
        stripped = line.text.strip()
        indented = line.text[:1].isspace() or stripped.startswith("^")
        if stripped in _CHAIN:
            tb.state, tb.idle = "chain", 0
            tb.keep(line.raw)
            return True, None
        if tb.state == "frames":
            return self._frame(tb, line, stripped, indented)
        return self._after(tb, line, stripped, indented)

    def _frame(self, tb: Traceback, line: Line, stripped: str, indented: bool) -> tuple[bool, Traceback | None]:
        """Inside the frames: indented lines belong, an exception line ends them, anything else is another
        process's output interleaved (a little of it is tolerated)."""
        if not stripped or indented:
            tb.keep(line.raw)
            if stripped.startswith("assert "):
                tb.last_assert = (line.no, line.text)
            return True, None
        if EXC_LINE.match(stripped):
            tb.keep(line.raw)
            tb.exceptions.append((line.no, stripped))
            tb.state, tb.idle = "linger", 0
            return True, tb if len(tb.exceptions) == 1 else None
        tb.idle += 1
        if tb.idle > _MAX_STRAY:
            self.open.remove(tb)
        return False, None

    def _after(self, tb: Traceback, line: Line, stripped: str, indented: bool) -> tuple[bool, Traceback | None]:
        """After an exception line (linger) or a chain marker (chain): a chained traceback may still follow,
        and the exception's message may go on below it."""
        lingering = tb.state == "linger"
        if lingering and indented and stripped and tb.exceptions[-1][0] not in tb.details:
            # The message goes on below the exception line (pydantic: "  Value error, ...").
            tb.details[tb.exceptions[-1][0]] = (line.no, stripped)
        if lingering and stripped and not indented and tb.exceptions[-1][1].endswith(":") and tb.idle < 8:
            # A message that continues below its exception line (Triton's "CompilationError: at 1:0:", then the
            # kernel's source, then the error it hit): the inner exception, if one is quoted, says why.
            if _INNER_EXC.match(stripped):
                tb.details[tb.exceptions[-1][0]] = (line.no, stripped)
            tb.idle += 1
            tb.keep(line.raw)
            return True, None
        if not stripped or (indented and lingering):
            tb.idle += 1
            if tb.idle > 8:
                self.open.remove(tb)
            else:
                tb.keep(line.raw)
            return True, None
        self.open.remove(tb)
        return False, None

    def flush(self) -> None:
        self.open.clear()
