"""One RE2 automaton over every rule pattern, run on whole chunks of bytes.

Most lines of a startup log match no rule. Searching every pattern in every line, one at a time, costs
~30 MB/s; RE2 runs the union of all patterns as one automaton at C speed over a whole chunk, and only the
lines it hits (plus the lines of an open traceback) reach the Python rules. A prefilter may hit
more lines than the rules want (leading anchors are dropped), never fewer.
"""

from __future__ import annotations

import re2

from bootwatch.engines.pattern import UNANCHORED as _UNANCHORED
from bootwatch.engines.rules import RuleBook, compile_pattern
from bootwatch.errors import UsageError

# A command typed at a shell prompt and pasted with its output: bash's `user@host:dir$ `, a bare `$ `, a conda
# env's `(env) ` before either, PowerShell's `PS C:\dir> `, cmd.exe's `C:\dir>`. A `#` prompt only with its
# user@host: a bare `# ` begins a comment or a count (vLLM's `# GPU blocks: …`).
SHELL_PROMPT = (
    r"^(?:\([\w.\-]+\) ?)?"
    r"(?:[\w.\-]+@[\w.\-]+(?::[^\s$#]*)?[$#] |\$ |PS [A-Za-z]:\\[^>]*> |[A-Za-z]:\\[^>]*>)(?P<command>\S.*)$"
)

# Structure that the tracker reads whatever the engine: traceback headers and exception-like lines.
STRUCTURAL = (
    SHELL_PROMPT,
    r"Traceback \(most recent call last\):",
    r"(?:^|\s|\]|\))[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Fault|Warning)(?::|[ \t\r]*$)",
    # Lines logged at error level, whatever their words: the explanation of a death no rule knows.
    r"\b(?:ERROR|CRITICAL|FATAL|ERR)\b|\] \[E\] |\d\.\d\d\.\d{3}\.\d{3} E |^[EF]\d{4} \d\d:",
)


def for_union(pattern: str, anchors: bool = False) -> str:
    """`pattern` as one branch of a union that only says where lines hit: every `^` anchor (outside character
    classes) dropped, since in a rule it means the start of the message, which in the raw line comes after a
    prefix (dropping one only widens the prefilter, never narrows it); every group made non-capturing, since
    group names would clash across rules and captures make RE2 leave its DFA for a slower engine. `anchors`
    keeps the anchors (a pattern written for the raw line; the rule book's set, matched on messages). A `$` also
    takes the \r of a CRLF line before it."""
    out = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
        elif c == "[":
            in_class = True
            out.append(c)
            if pattern[i + 1 : i + 2] == "^":  # a negated class keeps its ^
                out.append("^")
                i += 1
            if pattern[i + 1 : i + 2] == "]":  # "]" first in a class is a literal
                out.append("]")
                i += 1
        elif c == "(":
            named = _NAMED_GROUP.match(pattern, i)
            if named is not None:
                out.append("(?:")
                i = named.end()
                continue
            out.append("(" if pattern[i + 1 : i + 2] == "?" else "(?:")
        elif c == "$":
            # a rule's end of message is the raw line's end before its \r in a log with CRLF endings (Windows,
            # a container's pseudo-terminal): RE2's multi-line `$` is only the place before a \n
            out.append("\r*$")
        elif c != "^" or anchors:
            out.append(c)
        i += 1
    return "".join(out)


_NAMED_GROUP = re2.compile(r"\(\?P?<\w+>")


class Prefilter:
    """`skip_kinds` leaves rules of those kinds out: the skim of a ready launch's long serving stretch leaves
    out `stats` and the startup-only kinds (their lines then cost what an unmatched line costs)."""

    def __init__(self, book: RuleBook, skip_kinds: frozenset[str] = frozenset()) -> None:
        parts = [for_union(p, anchors=True) for p in STRUCTURAL]
        crates = sorted({c for er in book.engines.values() for c in er.targets})
        if crates:  # a tracing line from a crate only one engine logs from: its target is evidence (detection.py)
            parts.append(r"Z\s+(?:TRACE|DEBUG|INFO|WARN|ERROR)\s+(?:" + "|".join(crates) + r")(?:::\w+)*: ")
        seen = set(parts)
        for rule in book.all_rules():
            if rule.kind == "category" or rule.kind in skip_kinds:
                # a category classifies a failure already found; never a reason to look at a line
                continue
            p = for_union(rule.regex.pattern)
            if p in seen:
                continue
            compile_pattern(p, rule.source)  # its own error message, before the union's would name no rule
            seen.add(p)
            parts.append(p)
        opts = re2.Options()
        opts.max_mem = 256 << 20
        opts.log_errors = False
        union = "|".join(f"(?:{p})" for p in parts)
        try:
            self._re = re2.compile(("(?m)" + union).encode(), opts)
        except re2.error:
            raise UsageError(
                "the rules together are too large for one RE2 automaton (256 MiB); "
                "simplify the patterns of the --rules files"
            ) from None

    def line_starts(self, data: bytes) -> list[int]:
        """Offsets in `data` of the starts of the lines that hold at least one hit, ascending, unique."""
        out: list[int] = []
        # RE2 itself, not the wrapper's generator: this runs once per hit line.
        match, find, rfind = self._re._regexp.Match, data.find, data.rfind
        pos, n = 0, len(data)
        while pos < n:
            s = match(_UNANCHORED, data, pos, n)[0][0]
            if s < 0:
                break
            out.append(rfind(b"\n", 0, s) + 1)
            nl = find(b"\n", s)
            pos = n if nl < 0 else nl + 1
        return out
