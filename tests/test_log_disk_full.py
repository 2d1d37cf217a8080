"""`run --log` on a filesystem that fills up: the server's writes to its log fail (ENOSPC) and it dies with
nothing in the log to say why (its traceback could not be written either). bootwatch names the full
filesystem as the cause, not the last line that got through. A real 1 MiB tmpfs, mounted for the test."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVER = """
print("INFO 11-18 17:10:46 api_server.py:585] vLLM API server version 0.6.4.post1", flush=True)
print("INFO 11-18 17:10:47 model_runner.py:1072] Starting to load model /models/x...", flush=True)
for i in range(10**6):  # until the filesystem is full: print raises OSError (ENOSPC), and that is lost too
    print(f"INFO 11-18 17:10:48 loader.py:1] tick {i} " + "y" * 100, flush=True)
"""


@contextlib.contextmanager
def small_tmpfs(where: Path) -> Iterator[Path]:
    where.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root in a namespace that allows it): {p.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_log_filesystem_is_named_as_the_cause(tmp_path: Path) -> None:
    server = tmp_path / "fill_srv.py"
    server.write_text(SERVER)
    with small_tmpfs(tmp_path / "small") as small:
        (small / "filler").write_bytes(b"\0" * 900_000)  # 900 KB of the 1 MiB already taken
        log = small / "s.log"
        p = subprocess.run(
            [sys.executable, "-m", "bootwatch", "run", "--json", "--log", str(log), "--", sys.executable, str(server)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "BOOTWATCH_HOME": str(tmp_path / "home")},
        )
        assert p.returncode == 1, p.stderr
        failure = json.loads(p.stdout.splitlines()[-1])["failure"]
        # Was "process exited with code 1", the banner as its context: nothing said the disk was full.
        assert "no space left on the filesystem of its log" in failure["text"] and "ENOSPC" in failure["text"], failure
        assert str(log) in failure["text"]


def test_a_log_filesystem_that_fills_while_the_server_lives_is_said_once(tmp_path: Path) -> None:
    server = tmp_path / "fill_srv.py"
    server.write_text(  # it survives its failed writes and goes on quietly: the output is lost, not the server
        "import time\ntry:\n" + "".join(f"    {x}\n" for x in SERVER.strip().splitlines()) + "except OSError:\n"
        "    time.sleep(60)\n"
    )
    with small_tmpfs(tmp_path / "small") as small:
        (small / "filler").write_bytes(b"\0" * 900_000)
        p = subprocess.run(
            [sys.executable, "-m", "bootwatch", "run", "--json", "--timeout", "4s", "--log", str(small / "s.log")]
            + ["--", sys.executable, str(server)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "BOOTWATCH_HOME": str(tmp_path / "home")},
        )
        assert p.returncode == 124, p.stderr
        notes = [e for e in map(json.loads, p.stdout.splitlines()) if e.get("kind") == "bootwatch"]
        full = [e["text"] for e in notes if "is full (ENOSPC)" in e["text"]]
        assert len(full) == 1, notes
