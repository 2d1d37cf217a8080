from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("BOOTWATCH_CORPUS", ROOT.parent / "shared" / "corpus"))
FIXTURES = ROOT / "tests" / "fixtures"


def corpus_labels() -> list[Path]:
    labels = sorted(CORPUS.glob("*/*.json"))
    assert labels, f"no labelled logs found in {CORPUS} (set BOOTWATCH_CORPUS)"
    return labels


@pytest.fixture(scope="session")
def corpus() -> Path:
    assert CORPUS.is_dir(), f"corpus not found at {CORPUS} (set BOOTWATCH_CORPUS)"
    return CORPUS
