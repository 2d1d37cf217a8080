"""`bootwatch.launch()` and `bootwatch run` are one runner (runner.py): on the same real llama-server they
emit the same kinds of event, the startup-insight part included: an ETA from the history once startups of
the same command were recorded, and "it moves" activity while the log is silent.

The silent phase is real llama-server work: the model is the tiny GGUF with one extra metadata array of ten
million strings (a key llama.cpp does not use), which gguf_init parses one string at a time, on the CPU,
with no line in the log for several seconds in load_weights."""

from __future__ import annotations

import json
import os
import struct
import subprocess
from pathlib import Path

import pytest

import bootwatch
from bootwatch.insight.eta import ALIKE_MIN
from bootwatch.tracker import Event

from .test_real_servers import BOOTWATCH, PATHS, free_port, llama_cmd

pytestmark = [pytest.mark.real_server, pytest.mark.slow]
PADDING = 30_000_000  # strings: ~300 MB, well past the 5 s of silence that makes an activity event, idle or loaded


def padded_gguf(src: Path, dst: Path, count: int = PADDING) -> Path:
    """`src` with one more key-value pair, an array of `count` one-byte strings, put first (GGUF v3: magic,
    version, tensor count, kv count, then the pairs). Its size is a multiple of 64 bytes, so the tensor
    data after it keeps its alignment."""
    data = src.read_bytes()
    assert data[:4] == b"GGUF"
    version, tensors, kvs = struct.unpack_from("<IQQ", data, 4)
    key = b"bootwatch.padding"
    fixed = 8 + 4 + 4 + 8 + count * 9  # key length, type ARRAY, element type STRING, count, the strings
    key += b"_" * (-(fixed + len(key)) % 64)
    pair = struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 8, count) + (struct.pack("<Q", 1) + b"x") * count
    assert len(pair) % 64 == 0
    dst.write_bytes(data[:4] + struct.pack("<IQQ", version, tensors, kvs + 1) + pair + data[24:])
    return dst


def run_events(tmp_path: Path, home: Path, cmd: list[str], name: str) -> list[dict]:
    p = subprocess.run(
        [*BOOTWATCH, "run", "--json", "--timeout", "180", "--log", str(tmp_path / name), "--then", "true", "--", *cmd],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "BOOTWATCH_HOME": str(home)},
    )
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    events = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    assert p.returncode == 0 and events[-1]["verdict"] == "ready", events[-1]
    return events


def kinds_of(events: list[dict]) -> set[str]:
    """The event kinds, without the summary and bootwatch's own notes (the API keeps those apart)."""
    return {
        e["event"]
        for e in events
        if e["event"] != "summary" and not (e["event"] == "warning" and e["kind"] == "bootwatch")
    }


def test_launch_emits_what_run_emits_eta_and_activity_included(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    gguf = padded_gguf(Path(PATHS["BOOTWATCH_TINY_GGUF"]), tmp_path / "padded.gguf")
    for i in range(ALIKE_MIN):  # the recorded startups: enough alike ones for a history ETA
        run_events(tmp_path, home, llama_cmd(free_port(), gguf=str(gguf)), f"recorded{i}.log")
    by_run = run_events(tmp_path, home, llama_cmd(free_port(), gguf=str(gguf)), "second.log")

    monkeypatch.setenv("BOOTWATCH_HOME", str(home))
    seen: list[Event] = []
    with bootwatch.launch(llama_cmd(free_port(), gguf=str(gguf)), log_dir=tmp_path, timeout=180, on_event=seen.append):
        pass
    by_launch = [ev.to_json(0.0) for ev in seen]

    for name, events in (("run", by_run), ("launch", by_launch)):
        history_eta = [e for e in events if e["event"] == "eta" and e.get("basis", "").startswith("engine")]
        assert history_eta and history_eta[0]["n"] >= 1, (name, history_eta)
        moving = [e for e in events if e["event"] == "activity"]
        assert moving and moving[0]["phase"] == "load_weights" and "it moves" in moving[0]["message"], (name, moving)
        assert not [e for e in events if e["event"] in ("stall", "stalled")], name
    assert kinds_of(by_launch) == kinds_of(by_run)
