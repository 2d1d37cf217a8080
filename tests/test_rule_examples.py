"""Every rule in every engine file is backed by a real log line that it matches.

A rule's `example` must occur in a real log: a corpus log or a fixture file of lines copied from public
server logs (tests/fixtures/real_lines, each group with its source). The rule must match the message of
the real line that holds the example, after the same normalisation the live path applies.
"""

from __future__ import annotations

from functools import cache

import pytest

from bootwatch.engines import load_rulebook
from bootwatch.lines import Normalizer
from bootwatch.lines.ansi import strip_ansi

from .conftest import AFTER_READY, CORPUS, FIXTURES


@cache
def real_lines() -> tuple[str, ...]:
    out: list[str] = []
    for path in sorted(CORPUS.glob("*/*.log")):
        out += strip_ansi(path.read_bytes().decode("utf-8", "replace")).split("\n")
    for path in sorted(AFTER_READY.glob("*/*.log")):  # real logs that run past ready (tests/after_ready)
        out += strip_ansi(path.read_bytes().decode("utf-8", "replace")).split("\n")
    for path in sorted((FIXTURES / "recorded").glob("*.log")):  # recorded by the project from real servers
        out += strip_ansi(path.read_bytes().decode("utf-8", "replace")).split("\n")
    for path in sorted((FIXTURES / "real_lines").glob("*.log")):
        out += [x for x in path.read_text("utf-8").split("\n") if x and not x.startswith("# ")]
    return tuple(out)


def _rules():
    book = load_rulebook()
    seen = set()
    for er in book.engines.values():
        for r in er.all():
            if r.source not in seen:
                seen.add(r.source)
                yield r


RULES = list(_rules())


@pytest.mark.parametrize("rule", RULES, ids=[r.source for r in RULES])
def test_rule_matches_its_real_example(rule) -> None:
    assert rule.example, f"{rule.source} has no example"
    examples = rule.example if isinstance(rule.example, list) else [rule.example]
    for example in examples:
        holders = [x for x in real_lines() if example in x]
        assert holders, f"{rule.source}: example not found in any real log: {example[:120]!r}"
        texts = [seg.text for line in holders[:50] for seg in Normalizer(2025).lines(1, line)]
        if rule.kind == "category":
            texts += [seg.raw for line in holders[:50] for seg in Normalizer(2025).lines(1, line)]
        assert any(rule.regex.search(t) for t in texts), f"{rule.source} does not match {holders[0][:200]!r}"


def test_rules_load_for_every_engine() -> None:
    book = load_rulebook()
    for name in ("sglang", "vllm", "tgi", "llamacpp", "lmdeploy", "trtllm", "unknown"):
        assert name in book.engines, name
        assert book.engines[name]["ready"], f"{name} has no ready rule"
