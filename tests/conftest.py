from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The suite never writes to the user's own history store.
os.environ["BOOTWATCH_HOME"] = tempfile.mkdtemp(prefix="bootwatch-test-home-")
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


HELPER = ROOT / "tests" / "helpers" / "fake_server.py"


def _strays() -> list:
    import psutil

    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = p.info.get("cmdline") or []
        # The stand-in server itself (python fake_server.py ...), not a bootwatch that names it as an argument.
        if len(cmd) > 1 and cmd[1].endswith("fake_server.py"):
            out.append(p)
    return out


@pytest.fixture(autouse=True)
def no_orphans():
    """Every test leaves no server process behind; a stray one fails the test (and is killed)."""
    yield
    import time

    deadline = time.time() + 3
    strays = _strays()
    while strays and time.time() < deadline:
        time.sleep(0.1)
        strays = _strays()
    for p in strays:
        try:
            p.kill()
        except Exception:
            pass
    assert not strays, f"processes left behind: {[p.pid for p in strays]}"
