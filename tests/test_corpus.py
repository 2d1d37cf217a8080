"""bootwatch report over every real, labelled log: verdict, root-cause line and ready line."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import corpus_labels
from .corpus_scoring import judge


@pytest.mark.parametrize("label", corpus_labels(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_corpus_log(label: Path) -> None:
    j = judge(label)
    assert j.verdict_ok, j.why()
    assert j.cause_ok is not False, j.why()
    assert j.ready_ok is not False, j.why()
    assert j.engine_ok, j.why()
