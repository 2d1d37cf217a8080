"""The README's and docs' examples are real output: each block marked `<!-- example -->` holds a command
(`$ ...`, run from the repository root) and what it printed. `scripts/readme-examples --write` runs them and
writes the output in; `tests/test_readme.py` runs them and fails when a block no longer matches (times,
durations, pids and temporary paths aside), so the examples cannot drift from the code.

A block marked `<!-- screen -->` is the live view as a person sees it: the command runs in tmux at 80x24
while a real recorded SGLang startup is written into its log; the screen is captured mid-startup.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
DEMO = "/tmp/bootwatch-demo"  # where the examples write; each check gets a fresh directory in its place

_BLOCK = re.compile(r"<!-- (example|screen) -->\n```[a-z]*\n\$ (?P<cmd>[^\n]*)\n(?P<out>.*?)```\n", re.S)


@dataclass(frozen=True)
class Block:
    path: Path
    kind: str  # "example" | "screen"
    command: str
    output: str
    start: int
    end: int

    @property
    def name(self) -> str:
        return f"{self.path.name}:{self.command[:60]}"


def blocks(path: Path) -> list[Block]:
    text = path.read_text("utf-8")
    return [Block(path, m[1], m["cmd"], m["out"], m.start(), m.end()) for m in _BLOCK.finditer(text)]


def all_blocks() -> Iterator[Block]:
    for path in DOCS:
        yield from blocks(path)


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BOOTWATCH_", "COLUMNS", "LINES"))}
    env.update(
        BOOTWATCH_HOME=str(home),
        NO_COLOR="1",
        TZ="UTC",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


def run(block: Block, demo: Path, home: Path) -> str:
    """What the block's command prints now (stdout and stderr, as a terminal would show them piped)."""
    command = block.command.replace(DEMO, str(demo))
    if block.kind == "screen":  # a history of its own: its watch, stopped mid-startup, is no example's startup
        return _screen(command, demo, home / "screen").replace(str(demo), DEMO)
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env=environment(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    return "\n".join(line.rstrip() for line in done.stdout.replace(str(demo), DEMO).splitlines()) + "\n"


def _screen(command: str, demo: Path, home: Path) -> str:
    """The live view mid-startup: the SGLang EAGLE example written up to half its first CUDA-graph capture."""
    if shutil.which("tmux") is None:
        raise RuntimeError("tmux is needed for a screen example")
    lines = (ROOT / "examples" / "sglang-eagle2-ready.log").read_bytes().splitlines(keepends=True)
    capture = next(i for i, line in enumerate(lines) if b"Capture cuda graph begin" in line)
    log = demo / "sglang.log"
    log.write_bytes(b"")
    name = f"bw-{uuid.uuid4().hex[:8]}"
    env = environment(home)
    exports = " ".join(f"{k}={v!r}" for k, v in env.items() if k in ("BOOTWATCH_HOME", "TZ", "PATH"))
    subprocess.run(
        ["tmux", "-L", name, "new-session", "-d", "-x", "80", "-y", "24", "-s", name,
         f"cd {ROOT} && unset COLUMNS LINES && export {exports} && {command}; sleep 60"],
        check=True, timeout=10,
    )  # fmt: skip
    try:
        time.sleep(1.0)
        with log.open("ab") as f:
            for line in lines[: capture + 1]:
                f.write(line)
                f.flush()
                time.sleep(0.1)
            f.write(
                b"\r 50%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88     | 17/34 [00:04<00:04,  4.18it/s]\n"
            )
        time.sleep(2.0)
        screen = subprocess.run(
            ["tmux", "-L", name, "capture-pane", "-p", "-t", name], capture_output=True, text=True, timeout=10
        ).stdout
    finally:
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True, timeout=10)
    return "\n".join(line.rstrip() for line in screen.rstrip("\n").splitlines()) + "\n"


_VARYING = [
    (re.compile(r"\b\d\d:\d\d:\d\d\b"), "HH:MM:SS"),
    (re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d\b"), "YYYY-MM-DD HH:MM"),
    (re.compile(r"\b\d+(?:\.\d+)? ?(?:ms|s)\b|\b\d+m\d\ds\b|\b\d+h\d\dm\b"), "DUR"),
    (re.compile(r"\bpid \d+"), "pid N"),
    (re.compile(r'("(?:t|elapsed_s|duration_s|started_at|ended_at)": )[\d.]+'), r"\1N"),
    (re.compile(r"[━╸╺]+"), "BAR"),
    (re.compile(r"\bport \d{4,5}\b|127\.0\.0\.1:\d{4,5}"), "PORT"),
    (re.compile(r"[ \t]+"), " "),
]


# The health probe runs beside the log's reader: where its answer falls among the log's lines is a race.
_RACING = re.compile(r"^HH:MM:SS health: .*$\n?", re.M)


def normalise(text: str) -> str:
    for pattern, repl in _VARYING:
        text = pattern.sub(repl, text)
    text = _RACING.sub("", text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def fresh() -> tuple[Path, Path, tempfile.TemporaryDirectory[str]]:
    """A demo directory and an empty history for one file's examples, run in order."""
    tmp = tempfile.TemporaryDirectory(prefix="bootwatch-readme-")
    demo, home = Path(tmp.name) / "demo", Path(tmp.name) / "home"
    demo.mkdir()
    return demo, home, tmp


def write(path: Path) -> int:
    """Run every example of one file in order and write their output in; returns how many changed."""
    demo, home, tmp = fresh()
    with tmp:
        text = path.read_text("utf-8")
        changed = 0
        for b in reversed(list(_in_order(blocks(path), demo, home))):
            block, out = b
            if normalise(out) != normalise(block.output):
                changed += 1
            fence = text[block.start : block.end].split("\n", 2)[1]
            text = (
                text[: block.start]
                + f"<!-- {block.kind} -->\n{fence}\n$ {block.command}\n{out}```\n"
                + text[block.end :]
            )
        path.write_text(text, "utf-8")
        return changed


def _in_order(found: list[Block], demo: Path, home: Path) -> Iterator[tuple[Block, str]]:
    for block in found:
        yield block, run(block, demo, home)
