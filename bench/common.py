"""What the benchmarks share: running under the project's venv, the real corpus as one blob, and where
scripts/real-servers put the real servers."""

from __future__ import annotations

import os
import socket
import subprocess
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


def real_server_paths() -> dict[str, str]:
    """BOOTWATCH_VLLM_PY, BOOTWATCH_LLAMA_SERVER, BOOTWATCH_TINY_MODEL, ... as scripts/real-servers prints them."""
    out = subprocess.run(
        ["bash", str(REPO / "scripts" / "real-servers"), "paths"], capture_output=True, text=True, check=True
    ).stdout
    return dict(line[7:].split("=", 1) for line in out.splitlines() if line.startswith("export "))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
