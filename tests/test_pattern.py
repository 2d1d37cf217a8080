"""The rules' fast RE2 search answers exactly as the google-re2 wrapper does, on every real line and on text
that is not ASCII; the prefilter's union form keeps what the rules need and captures nothing."""

from __future__ import annotations

import re2
from hypothesis import given
from hypothesis import strategies as st

from bootwatch.engines.pattern import Pattern
from bootwatch.engines.prefilter import for_union
from bootwatch.lines import Normalizer
from bootwatch.pipeline import rules_for

from .test_rule_examples import real_lines


def _same(p: Pattern, text: str) -> None:
    fast, slow = p.search(text), p._compiled.search(text)
    assert (fast is None) == (slow is None), (p.pattern, text)
    if fast is not None:
        assert fast.groupdict() == slow.groupdict(), (p.pattern, text)
        assert (fast.start(), fast.end(), fast.group()) == (slow.start(), slow.end(), slow.group())


def test_every_rule_finds_what_the_wrapper_finds_on_real_lines() -> None:
    book, _ = rules_for(())
    rules = [r for r in book.all_rules() if r.kind != "category"]
    texts = [seg.text for raw in real_lines() for seg in Normalizer(2025).lines(1, raw)]
    found: set[int] = set()
    for text in texts:
        # The set says which patterns the wrapper would find here; every other rule must find nothing.
        hits = {id(r) for r in book.matching(text)}
        for r in rules:
            if id(r) in hits:
                _same(r.regex, text)
                found.add(id(r))
            else:
                assert r.regex.search(text) is None, (r.source, text)
    assert not [r.source for r in rules if id(r) not in found]


# Non-ASCII lines take the wrapper's path; offsets are characters, not bytes, either way.
@given(st.text(alphabet="ab é€🙂:=0123456789", max_size=40))
def test_non_ascii_offsets_are_characters(text: str) -> None:
    p = Pattern(re2.compile(r"(?P<word>[ab]+)(?P<n>\d+)?"))
    _same(p, text)
    m = p.search("é€ ab12")
    assert m is not None and m.start() == 3 and m.group("n") == "12"


def test_union_form_drops_anchors_and_captures_only() -> None:
    assert for_union(r"^(?P<a>x)(y)[^(](?:z)\(w\)") == r"(?:x)(?:y)[^(](?:z)\(w\)"
    assert for_union(r"(?:^|\s)E\d{4}", anchors=True) == r"(?:^|\s)E\d{4}"
    assert for_union(r"[]^(]x") == r"[]^(]x"  # a class starting with "]" and holding ^ and ( is left as it is
    assert re2.compile(for_union(r"^(?P<a>x)(y)")).groups == 0
