"""What the benchmarks share: running under the project's venv, and the real corpus as one blob."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def reexec_under_venv() -> None:
    """Called when an import failed: run the same command again under .venv's Python (or give up)."""
    venv_py = REPO / ".venv" / "bin" / "python"
    if venv_py.exists() and Path(sys.executable) != venv_py:
        os.execv(venv_py, [str(venv_py), *sys.argv])


def default_corpus() -> Path:
    env = os.environ.get("BOOTWATCH_CORPUS")
    return Path(env) if env else (REPO / "tests" / "corpus").resolve()


def corpus_blob(corpus: Path) -> bytes:
    """Every corpus log, sorted by path, concatenated byte for byte (no separator added)."""
    logs = sorted(corpus.glob("*/*.log"))
    if not logs:
        raise SystemExit(f"no logs found under {corpus}/*/*.log")
    return b"".join(p.read_bytes() for p in logs)
