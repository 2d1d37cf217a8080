"""The model's weight files on local disk, found from the server's command line or the log's `model` fact:
their total size is what a load reads, so bytes read against it are progress. Nothing is ever fetched; a
hub id (org/name) that is not a local path is simply not found."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
MODEL_FLAGS = ("--model", "-m", "--model-path", "--model-dir", "--model_path")
# `vllm serve PATH` and `sglang serve PATH`: the model is the first positional argument after `serve`.
SERVE_WORDS = ("serve",)
# llama.cpp splits a GGUF as NAME-00001-of-00005.gguf: one named shard means the whole set.
GGUF_SHARD = re.compile(r"^(?P<stem>.*)-(?P<i>\d{5})-of-(?P<n>\d{5})\.gguf$")
PYTHON = re.compile(r"^python[\d.]*$")
MAX_FILES = 4096  # a directory with more candidate files than this is not a model directory


@dataclass(frozen=True)
class Weights:
    path: str  # what named them (a file or a directory)
    files: tuple[str, ...]
    total_bytes: int


def model_paths_from_argv(argv: Sequence[str]) -> list[str]:
    """Every argument that may name the model, in command-line order."""
    out: list[str] = []
    for i, a in enumerate(argv):
        for flag in MODEL_FLAGS:
            if flag == "-m" and i > 0 and PYTHON.match(os.path.basename(argv[i - 1])):
                continue  # `python -m sglang.launch_server`: a module, not the model
            if a == flag and i + 1 < len(argv):
                out.append(argv[i + 1])
            elif a.startswith(flag + "=") and flag.startswith("--"):
                out.append(a.split("=", 1)[1])
        if os.path.basename(a) in ("vllm", "sglang") and i + 2 < len(argv) and argv[i + 1] in SERVE_WORDS:
            nxt = argv[i + 2]
            if not nxt.startswith("-"):
                out.append(nxt)
    return out


def _gguf_set(path: Path) -> list[Path]:
    m = GGUF_SHARD.match(path.name)
    if m is None:
        return [path]
    n = int(m.group("n"))
    return [path.with_name(f"{m.group('stem')}-{i:05d}-of-{n:05d}.gguf") for i in range(1, n + 1)]


def _dir_files(d: Path) -> list[Path]:
    """The weight files of a model directory (not recursive: sub-directories hold other things, e.g. an
    `original/` copy of the same weights that a server does not read). safetensors win over .bin/.pt when
    both are there: servers read one format, and HF repositories often ship both."""
    try:
        entries = [e for e in os.scandir(d) if e.is_file()]
    except OSError:
        return []
    if len(entries) > MAX_FILES:
        return []
    files = [Path(e.path) for e in entries if e.name.endswith(WEIGHT_SUFFIXES)]
    safetensors = [f for f in files if f.suffix == ".safetensors"]
    ggufs = [f for f in files if f.suffix == ".gguf"]
    return sorted(safetensors or ggufs or files)


def find_weights(candidates: Iterable[str]) -> Weights | None:
    """The first candidate that is a local weight file or a directory holding some."""
    for c in candidates:
        if not c or "://" in c:
            continue
        p = Path(os.path.expanduser(c))
        try:
            if p.is_file():
                files = [f for f in _gguf_set(p) if f.is_file()] if p.suffix == ".gguf" else [p]
            elif p.is_dir():
                files = _dir_files(p)
            else:
                continue
            total = sum(f.stat().st_size for f in files)
        except OSError:
            continue
        if files and total > 0:
            return Weights(str(p), tuple(str(f) for f in files), total)
    return None


__all__ = ["Weights", "find_weights", "model_paths_from_argv"]
