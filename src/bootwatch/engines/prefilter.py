"""One RE2 automaton over every rule pattern, run on whole chunks of bytes.

Most lines of a startup log match no rule. Searching every pattern in every line, one at a time, costs
~30 MB/s; RE2 runs the union of all patterns as one automaton at C speed over a whole chunk, and only the
lines it hits (plus the lines of an open traceback) reach the Python rules. A prefilter may hit
more lines than the rules want (leading anchors are dropped), never fewer.
"""

from __future__ import annotations

import re2

from bootwatch.engines.rules import RuleBook, compile_pattern
from bootwatch.errors import UsageError

# Structure that the tracker reads whatever the engine: traceback headers and exception-like lines.
STRUCTURAL = (
    r"Traceback \(most recent call last\):",
    r"(?:^|\s|\]|\))[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Fault|Warning)(?::|[ \t\r]*$)",
    # Lines logged at error level, whatever their words: the explanation of a death no rule knows.
    r"\b(?:ERROR|CRITICAL|FATAL|ERR)\b|\] \[E\] |\d\.\d\d\.\d{3}\.\d{3} E |^[EF]\d{4} \d\d:",
)


def _unanchor(pattern: str) -> str:
    """Drop every `^` anchor (outside character classes): in a rule it means the start of the message, which
    in the raw line comes after a prefix. Dropping an anchor only widens the prefilter, never narrows it."""
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
        elif c != "^":
            out.append(c)
        i += 1
    return "".join(out)


class Prefilter:
    def __init__(self, book: RuleBook) -> None:
        parts = list(STRUCTURAL)
        seen = set(parts)
        for rule in book.all_rules():
            if rule.kind == "category":  # classifies a failure already found; never a reason to look at a line
                continue
            p = _unanchor(rule.regex.pattern)
            if p in seen:
                continue
            compile_pattern(p, rule.source)  # its own error message, before the union's would name no rule
            seen.add(p)
            parts.append(p)
        opts = re2.Options()
        opts.max_mem = 256 << 20
        opts.log_errors = False
        # Named groups are for the rules; strip them so that one automaton holds everything.
        union = "|".join(f"(?:{strip_names(p)})" for p in parts)
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
        search, find, rfind = self._re.search, data.find, data.rfind
        pos, n = 0, len(data)
        while pos < n:
            m = search(data, pos)
            if m is None:
                break
            s = m.start()
            out.append(rfind(b"\n", 0, s) + 1)
            nl = find(b"\n", s)
            pos = n if nl < 0 else nl + 1
        return out


_GROUP_NAME = re2.compile(r"\\.|\(\?P?<\w+>")  # an escape is matched first so that `\(?P<x>` stays literal


def strip_names(p: str) -> str:
    """RE2 and the union need no group names; several rules may use the same one."""
    return _GROUP_NAME.sub(lambda m: m.group(0) if m.group(0).startswith("\\") else "(", p)
