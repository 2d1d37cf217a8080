"""The RE2 prefilter may pass lines that no rule wants, but must never drop a line that a rule matches."""

from __future__ import annotations

from bootwatch.lines import Normalizer
from bootwatch.lines.ansi import strip_ansi_bytes
from bootwatch.pipeline import rules_for

from .test_rule_examples import real_lines


def test_prefilter_keeps_every_line_a_rule_matches() -> None:
    book, pre = rules_for(())
    rules = [r for r in book.all_rules() if r.kind != "category"]  # categories classify failures, not lines
    missed = []
    for raw in real_lines():
        data = strip_ansi_bytes(raw.encode("utf-8", "replace")) + b"\n"
        hit = bool(pre.line_starts(data))
        if hit:
            continue
        for seg in Normalizer(2025).lines(1, raw):
            for r in rules:
                if r.regex.search(seg.text):
                    missed.append((r.source, raw[:120]))
    assert not missed, missed[:5]


def test_prefilter_finds_line_starts() -> None:
    _, pre = rules_for(())
    data = (
        b"noise\n[2025-05-01 05:11:17] Load weight begin. avail mem=78.58 GB\nmore noise\n"
        b"Traceback (most recent call last):\n"
    )
    starts = pre.line_starts(data)
    assert [data[s:].split(b"\n")[0][:8] for s in starts] == [b"[2025-05", b"Tracebac"]


def test_a_rule_that_ends_at_the_line_end_hits_a_crlf_line() -> None:
    # ollama/0.1.21-no-avx-cpu-cuda-v11-ext-server-sigill-failed.log (Windows line endings): "…libext_server.so\r\n"
    from bootwatch.engines import load_rulebook
    from bootwatch.engines.prefilter import Prefilter

    pf = Prefilter(load_rulebook())
    line = b"loading library /tmp/ollama1758121582/cuda_v11/libext_server.so"
    for end in (b"\n", b"\r\n"):
        data = b"noise\n" + line + end + b"more noise\n"
        assert pf.line_starts(data) == [6], end
