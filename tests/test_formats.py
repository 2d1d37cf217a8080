"""The prefix table (lines/formats.toml) as data: every entry's sample lines read as they say, lnav-style, and
the compiler's derived parts (first-character dispatch, glued-record starts) follow the patterns."""

from __future__ import annotations

import calendar
import re
import tomllib
from importlib import resources
from typing import Any

import pytest

from bootwatch.lines import prefixes
from bootwatch.lines.normalize import split_glued
from bootwatch.lines.prefixes import compile_table, first_chars, parse_prefix

YEAR = 2025  # yearless stamps (vLLM's) are read in this year

_DOC = tomllib.loads(resources.files("bootwatch.lines").joinpath("formats.toml").read_text())
_ENTRIES = [(kind, e) for kind in ("wrapper", "tag", "format") for e in _DOC[kind]]


def _samples() -> list[Any]:
    return [
        pytest.param(s, id=f"{kind}-{e['name']}-{i}")
        for kind, e in _ENTRIES
        for i, s in enumerate(e.get("samples", []))
    ]


def _utc(iso: str) -> float:
    return float(calendar.timegm(tuple(int(x) for x in re.findall(r"\d+", iso)[:6]) + (0, 0, 0)))  # type: ignore[arg-type]


def test_every_entry_has_samples_and_a_note() -> None:
    for kind, e in _ENTRIES:
        assert e.get("samples"), f"{kind} {e['name']} has no sample line"
        assert e.get("note"), f"{kind} {e['name']} says nothing of what it is"


@pytest.mark.parametrize("sample", _samples())
def test_sample_reads_as_it_says(sample: dict[str, str]) -> None:
    p = parse_prefix(sample["line"], YEAR)
    assert p.text == sample["message"]
    assert p.level == sample.get("level")
    assert p.t == (_utc(sample["time"]) if "time" in sample else None)
    assert p.proc == sample.get("proc")
    assert p.fmt == sample.get("fmt")


def test_every_format_reads_its_own_samples() -> None:
    # a sample read by an earlier format would not test the one it is listed under
    for e in _DOC["format"]:
        for s in e["samples"]:
            assert parse_prefix(s["line"], YEAR).fmt == e["name"], s["line"]


def test_dispatch_offers_each_format_every_character_it_can_start_with() -> None:
    for f in prefixes.TABLE.formats:
        chars, digit = first_chars(f.pattern.pattern)
        for c in chars | (set("0123456789٣") if digit else set()):
            assert f in prefixes._formats_at(c), (f.name, c)


def test_first_chars_of_a_pattern() -> None:
    assert first_chars(r"\[?x") == (frozenset("[x"), False)
    assert first_chars(r"(?:ab|\d)c") == (frozenset("a"), True)
    assert first_chars(r" ?\d{1,2}:") == (frozenset(" "), True)
    with pytest.raises(ValueError):
        first_chars(r"x?")  # matches the empty string: no first character
    with pytest.raises(ValueError):
        first_chars(r".x")  # any character: it could not be dispatched


def test_a_format_table_without_samples_still_compiles_and_dispatches() -> None:
    doc = {
        "wrapper": [{"name": "w", "pattern": r"<\d+> "}],
        "tag": [],
        "format": [{"name": "f", "pattern": r"(?P<level>[IE]) ", "levels": {"E": "ERROR"}, "glued": True}],
    }
    t = compile_table(doc)
    assert set(t.by_first) == {"I", "E"} and t.wrap_first == frozenset("<")
    assert t.glued.match("E x") and not t.glued.match("x")


def test_a_glued_record_splits_where_a_glued_prefix_starts() -> None:
    # tqdm without a newline, then TGI's own line (the rust_tracing format is marked glued)
    bar = "Downloading: 100%|██████████| 4/4 [00:10<00:00,  2.50s/it]"
    line = "2024-06-17T13:11:09.417238Z  INFO text_generation_launcher: Args {"
    assert split_glued(bar + line) == [bar, line]


def test_rust_tracing_keeps_the_messages_own_words() -> None:
    # the reproduced bug: the target group ate "error: " and "avx: "
    p = parse_prefix("2024-01-01T00:00:00.000000Z ERROR text_generation_launcher: error: CUDA out of memory", YEAR)
    assert (p.text, p.level, p.fmt) == ("error: CUDA out of memory", "ERROR", "rust_tracing")
    p = parse_prefix("2024-06-17T02:12:33.837370Z  INFO mistralrs_server: avx: false, neon: true", YEAR)
    assert p.text == "avx: false, neon: true"


def test_every_engine_claims_only_formats_the_table_has() -> None:
    # an engine file's `formats` names prefix families: a renamed format must not leave a claim behind
    from bootwatch.pipeline import rules_for

    book, _ = rules_for()
    names = {f.name for f in prefixes.TABLE.formats} | {"json"}
    for engine in book.engines:
        for fmt in book.for_engine(engine).formats:
            assert fmt in names, (engine, fmt)
