"""bootwatch report over every real, labelled log: verdict, root-cause line and ready line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bootwatch.analyze import analyze_path
from bootwatch.lines import Normalizer
from bootwatch.lines.ansi import strip_ansi

from .conftest import corpus_labels


def _message(line: str) -> str:
    """A physical line's message without its prefix (the SPEC lets failure.text drop the prefix)."""
    return Normalizer(2025).lines(1, line)[-1].text.strip()


def _physical_lines(log: Path) -> list[str]:
    return [strip_ansi(x) for x in log.read_bytes().decode("utf-8", "replace").split("\n")]


@pytest.mark.parametrize("label", corpus_labels(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_corpus_log(label: Path) -> None:
    want = json.loads(label.read_text())
    log = label.with_suffix(".log")
    got = analyze_path(log)
    lines = _physical_lines(log)

    assert got["verdict"] == want["outcome"], (got["verdict"], got.get("failure"))

    if want["outcome"] == "failed":
        f = got["failure"]
        assert f is not None
        assert _message(f["text"]) == _message(want["root_cause_line"])
        # The reported line number points at a line that holds that text.
        assert f["text"] in lines[f["line_no"] - 1]
    else:
        assert got["failure"] is None

    if want["outcome"] == "ready":
        r = got["ready"]
        assert r is not None
        assert r["text"] == _message(want["ready_line"])
        assert lines[r["line_no"] - 1].rstrip("\r") == want["ready_line"].rstrip("\r")
    else:
        assert got["ready"] is None


def test_every_engine_in_corpus_is_detected(corpus: Path) -> None:
    for label in corpus_labels():
        want = json.loads(label.read_text())
        got = analyze_path(label.with_suffix(".log"))
        assert got["engine"] == want["engine"], label.name
