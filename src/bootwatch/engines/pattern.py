"""A rule's RE2 pattern, searched in a line with as little Python around the C call as possible.

The google-re2 wrapper's `search` on a `str` is a generator that re-encodes the text and maps every byte
offset back to a character offset: ~10 µs a call, most of a rule's cost on a startup log where half the
lines reach the rules. Log lines are nearly always ASCII, where bytes and characters are the same offsets;
for them this calls RE2 on the bytes directly and builds a small match. Any other line goes through the
wrapper, so the answer is the same for every text (tests/test_pattern.py compares both on the corpus).
"""

from __future__ import annotations

from typing import Any

import re2

UNANCHORED = re2._Anchor.UNANCHORED


class Found:
    """The part of `re.Match` the rules read: group(), groupdict(), start(), end()."""

    __slots__ = ("_text", "_spans", "_names")

    def __init__(self, text: str, spans: list[tuple[int, int]], names: dict[str, int]) -> None:
        self._text = text
        self._spans = spans
        self._names = names

    def _index(self, group: int | str) -> int:
        return self._names[group] if isinstance(group, str) else group

    def group(self, group: int | str = 0) -> str | None:
        s, e = self._spans[self._index(group)]
        return None if s < 0 else self._text[s:e]

    def groupdict(self) -> dict[str, str | None]:
        text, spans = self._text, self._spans
        return {name: (None if spans[i][0] < 0 else text[spans[i][0] : spans[i][1]]) for name, i in self._names.items()}

    def start(self, group: int | str = 0) -> int:
        return self._spans[self._index(group)][0]

    def end(self, group: int | str = 0) -> int:
        return self._spans[self._index(group)][1]


class Pattern:
    """A compiled RE2 pattern with `search(text)` and the `pattern`/`groupindex` of `re.Pattern`."""

    __slots__ = ("_compiled", "_match", "_groups", "pattern", "groupindex")

    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled
        self._match = compiled._regexp.Match
        self.pattern: str = compiled.pattern
        self.groupindex: dict[str, int] = dict(compiled.groupindex)
        self._groups: int = compiled.groups

    def search(self, text: str) -> Found | None:
        if not text.isascii():
            m = self._compiled.search(text)
            return None if m is None else Found(text, [m.span(i) for i in range(self._groups + 1)], self.groupindex)
        spans = self._match(UNANCHORED, text.encode("ascii"), 0, len(text))
        if spans[0][0] < 0:
            return None
        return Found(text, spans, self.groupindex)
