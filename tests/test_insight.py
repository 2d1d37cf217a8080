"""Startup insight: slow vs stuck (the verdict machine fed activity samples, and real processes sampled),
weight files, ETAs and regressions from a real history store, and `run` end to end on a server whose log
goes silent while it reads its weights, or while it sleeps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bootwatch.insight.activity import ActivitySampler, tree_of
from bootwatch.insight.eta import book_from, quantile, regression
from bootwatch.insight.live import Insight
from bootwatch.insight.weights import find_weights, model_paths_from_argv
from bootwatch.pipeline import Analyzer
from bootwatch.store import Command, StoredPhase, StoredStartup, open_store, similar
from bootwatch.tracker import EtaEvent, Event, PhaseEvent, WarningEvent
from bootwatch.tracker.verdict import LogSays, Outcome, Output, Policy, Tick, VerdictMachine
from bootwatch.vocab.activity import CHECKED, Activity

ROOT = Path(__file__).resolve().parent.parent
BOOTWATCH = [sys.executable, "-m", "bootwatch"]
LOADER = str(ROOT / "tests" / "helpers" / "slow_loader.py")


def says(t: float, phase: str = "load_weights") -> LogSays:
    return LogSays(t, ready=False, failed=False, dying=False, runtime_failed=False, phase=phase, last_line="L")


def act(
    t: float,
    read_bps: float = 0.0,
    cores: float = 0.0,
    compilers: tuple[str, ...] = (),
    total: int | None = None,
    done: int | None = None,
    eta: float | None = None,
) -> Activity:
    return Activity(t, 0, 0.0, read_bps, cores, compilers, "EngineCore", 1, total, done, eta)


# ---- the machine: a stall only when nothing moves ---------------------------------------------------------
def test_reads_keep_a_silent_load_from_stalling_and_say_what_moves() -> None:
    m = VerdictMachine(Policy(stall_s=10.0), 0.0)  # load_weights: 2x, 20 s
    m.feed(says(0.0))
    kinds: list[str] = []
    for t in range(1, 60):
        for n in m.feed(Tick(float(t), activity=act(float(t), read_bps=120e6, total=10**10, done=10**9, eta=75.0))):
            kinds.append(n.kind)
            if n.kind == "activity":
                assert "reading weights at 120.0 MB/s (10% of 10.0 GB, ETA 1m15s" in n.message, n.message
    assert m.outcome is None and "stall" not in kinds
    assert kinds.count("activity") == 2  # at 5 s of silence, again 30 s later


def test_nothing_moving_stalls_and_says_what_was_checked() -> None:
    m = VerdictMachine(Policy(stall_s=10.0), 0.0)
    m.feed(says(0.0))
    m.feed(Tick(5.0, activity=act(5.0, read_bps=50e6)))  # moved until 5 s
    assert m.feed(Tick(14.0, activity=act(14.0))) == []
    notices = m.feed(Tick(15.0, activity=act(15.0)))
    assert [n.kind for n in notices] == ["stall"] and CHECKED in notices[0].message
    assert [n.kind for n in m.feed(Tick(25.0, activity=act(25.0)))] == ["stalled", "state"]
    assert m.outcome is Outcome.STALLED


def test_compilers_and_cpu_are_movement_but_cpu_alone_is_not_during_a_rendezvous() -> None:
    m = VerdictMachine(Policy(stall_s=10.0), 0.0)
    m.feed(says(0.0, phase="compile"))
    for t in range(1, 100):
        notices = m.feed(Tick(float(t), activity=act(float(t), compilers=("nvcc", "nvcc", "ninja"))))
        if t == 5:
            assert "compiling kernels: 3 compiler processes (2 nvcc, 1 ninja)" in notices[0].message
    assert m.outcome is None
    busy = VerdictMachine(Policy(stall_s=10.0), 0.0)
    busy.feed(says(0.0, phase="kv_cache"))
    for t in range(1, 60):
        busy.feed(Tick(float(t), activity=act(float(t), cores=1.0)))
    assert busy.outcome is None
    spin = VerdictMachine(Policy(stall_s=10.0), 0.0)
    spin.feed(says(0.0, phase="distributed_init"))
    for t in range(1, 12):
        spin.feed(Tick(float(t), activity=act(float(t), cores=1.0)))
    assert spin.outcome is Outcome.STALLED


def test_output_ends_the_silence_and_a_new_one_is_announced_again() -> None:
    m = VerdictMachine(Policy(stall_s=None), 0.0)
    m.feed(says(0.0))
    assert [n.kind for n in m.feed(Tick(6.0, activity=act(6.0, read_bps=1e7)))] == ["activity"]
    m.feed(Output(7.0))
    assert m.feed(Tick(8.0, activity=act(8.0, read_bps=1e7))) == []
    assert [n.kind for n in m.feed(Tick(12.0, activity=act(12.0, read_bps=1e7)))] == ["activity"]


# ---- sampling real processes ----------------------------------------------------------------------------
def _spawn(code: str, *args: str, executable: str | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([executable or sys.executable, "-c", code, *args])


def test_sampler_sees_reads_then_idleness_and_compiler_children(tmp_path: Path) -> None:
    big = tmp_path / "w.bin"
    big.write_bytes(os.urandom(1 << 20) * 48)
    reader = _spawn(
        "import sys, time\nf = open(sys.argv[1], 'rb', buffering=0)\n"
        "while f.read(1 << 20): time.sleep(0.05)\ntime.sleep(60)",
        str(big),
    )
    try:
        s = ActivitySampler(tree_of(reader.pid), find_weights([str(tmp_path)]))
        first = s.sample(time.time())
        assert first is not None and first.weights_total == 48 << 20
        time.sleep(1.2)
        a = s.sample(time.time())
        assert a is not None and a.reading and a.read_bytes > first.read_bytes and a.eta_s is not None
        deadline = time.time() + 30
        while a.reading and time.time() < deadline:  # the file is read to its end, then the reader sleeps
            time.sleep(1.0)
            a = s.sample(time.time())
            assert a is not None
        assert not a.reading and not a.busy and not a.moved("load_weights")
        assert a.weights_read is not None and a.weights_read >= (48 << 20) * 0.9
    finally:
        reader.kill()
        reader.wait()
    # A process named like a compiler in the tree (a symlink named ninja to the sleep command).
    ninja = tmp_path / "ninja"
    ninja.symlink_to("/bin/sleep")
    parent = _spawn("import subprocess, sys, time\nsubprocess.Popen([sys.argv[1], '60'])\ntime.sleep(60)", str(ninja))
    try:
        s = ActivitySampler(tree_of(parent.pid))
        deadline = time.time() + 10
        a = None
        while time.time() < deadline and not (a and a.compilers):
            time.sleep(0.5)
            a = s.sample(time.time())
        assert a is not None and a.compilers == ("ninja",) and a.moved("compile")
    finally:
        for p in tree_of(parent.pid)()[::-1]:
            p.kill()
        parent.wait()


# ---- weights -----------------------------------------------------------------------------------------------
def test_weight_files_from_the_command_line_directory_and_gguf_shards(tmp_path: Path) -> None:
    d = tmp_path / "m"
    d.mkdir()
    (d / "model-00001-of-00002.safetensors").write_bytes(b"x" * 100)
    (d / "model-00002-of-00002.safetensors").write_bytes(b"x" * 50)
    (d / "pytorch_model.bin").write_bytes(b"x" * 1000)  # the other format of the same weights: not read
    (d / "config.json").write_text("{}")
    assert model_paths_from_argv(["vllm", "serve", str(d), "--port", "1"]) == [str(d)]
    assert model_paths_from_argv(["python", "-m", "sglang.launch_server", f"--model-path={d}"]) == [str(d)]
    w = find_weights(model_paths_from_argv(["x", "--model", "Qwen/Qwen3-8B", "-m", str(d)]))
    assert w is not None and w.total_bytes == 150 and len(w.files) == 2
    shards = [tmp_path / f"big-{i:05d}-of-00003.gguf" for i in (1, 2, 3)]
    for i, s in enumerate(shards):
        s.write_bytes(b"g" * (10 + i))
    w = find_weights([str(shards[0])])
    assert w is not None and w.total_bytes == 33
    assert find_weights(["Qwen/Qwen3-8B", "https://example.com/x.gguf", str(tmp_path / "nothing")]) is None


# ---- ETAs and regressions from a real store ------------------------------------------------------------------
def _stored(i: int, load_s: float, model: str = "/models/m") -> StoredStartup:
    phases = (
        StoredPhase("start", False, 0.0, 2.0),
        StoredPhase("load_weights", False, 2.0, load_s),
        StoredPhase("kv_cache", False, 2.0 + load_s, 3.0),
        StoredPhase("ready", False, 5.0 + load_s, None),
    )
    return StoredStartup(
        1000.0 + i,
        1100.0 + i,
        "hostA",
        "x.log",
        Command.RUN,
        "vllm",
        "ready",
        "0.32.0",
        model,
        {"tp_size": 1},
        5.0 + load_s,
        5.0 + load_s,
        phases=phases,
    )


def test_eta_bands_and_regressions_from_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert quantile([1, 2, 3, 4, 5], 0.5) == 3 and quantile([1, 2, 3, 4, 5], 0.9) == pytest.approx(4.6)
    with open_store(tmp_path) as store:
        for i, load in enumerate((10.0, 12.0, 11.0, 30.0, 9.0)):
            store.add(_stored(i, load))
        store.add(_stored(9, 100.0, model="/models/other"))
    found = similar("vllm", "/models/m", {"tp_size": 1}, "hostA", base=tmp_path)
    book = book_from(found, "0.32.0")
    assert book is not None and book.basis == "engine+version+model+args" and book.n == 5
    band = book.phases["load_weights"]
    assert band.p50_s == 11.0 and band.p90_s == pytest.approx(22.8) and band.n == 5
    assert book.to_ready_from["load_weights"].p50_s == 14.0
    assert (
        regression("load_weights", False, 34.0, book)
        == "load_weights took 3.1× its median of the last 5 (34.0 s vs 11.0 s)"
    )
    assert regression("load_weights", False, 20.0, book) is None  # under 2x
    assert regression("kv_cache", False, 7.0, book) is None  # 2.3x but 4 s: noise
    # The session's side: a real tracker reads real lines; ETA when a phase begins, a warning when it ends.
    monkeypatch.setenv("BOOTWATCH_HOME", str(tmp_path))
    analyzer = Analyzer(engine="vllm", clock="arrival")
    insight = Insight(analyzer.tracker, None, host="hostA")
    t0 = time.time()
    lines = [
        b"INFO 05-25 10:54:28 [api_server.py:1] vLLM API server version 0.32.0\n",
        b"INFO 05-25 10:54:28 [core.py:1] Initializing a V1 LLM engine (v0.32.0) with config: "
        b"model='/models/m', tensor_parallel_size=1\n",
        b"INFO 05-25 10:54:28 [model_runner.py:1] Starting to load model /models/m...\n",
    ]
    out: list[Event] = []
    for k, line in enumerate(lines):
        out += insight.on_events(analyzer.feed(line, t0 + k), t0 + k)
    etas = [e for e in out if isinstance(e, EtaEvent)]
    assert etas and etas[-1].phase == "load_weights" and etas[-1].p50_s == 11.0, out
    end = analyzer.feed(
        b"INFO 05-25 10:55:28 [gpu_model_runner.py:1] Loading model weights took 1.0 GiB and "
        b"40.0 seconds\nINFO 05-25 10:55:28 [kv_cache_utils.py:1] GPU KV cache size: 100 tokens\n",
        t0 + 42,
    )
    warned = [e for e in insight.on_events(end, t0 + 42) if isinstance(e, WarningEvent)]
    assert any(e.warning == "slow_phase" and "load_weights took" in e.text for e in warned), end
    slow = next(e for e in warned if e.warning == "slow_phase")
    assert list(slow.to_json(0.0)) == ["t", "event", "line_no", "kind", "text", "phase", "took_s", "median_s", "n"]


# ---- end to end: run, a silent reader and a sleeper -------------------------------------------------------
def bw(home: Path, *args: str, timeout: float = 90) -> tuple[int, list[dict]]:
    p = subprocess.run(
        [*BOOTWATCH, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "BOOTWATCH_HOME": str(home)},
    )
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    return p.returncode, [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]


@pytest.mark.slow
def test_run_a_silent_slow_weight_load_is_loading_not_stalled(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    weights = model / "model.safetensors"
    weights.write_bytes(os.urandom(1 << 20) * 120)  # 126 MB read at 12 MB/s: ~10 s without a line
    code, events = bw(
        tmp_path / "home",
        "run",
        "--json",
        "--log",
        str(tmp_path / "r.log"),
        "--stall",
        "2",
        "--then",
        "true",
        "--",
        sys.executable,
        LOADER,
        "--model",
        str(model),
        "--read",
        str(weights),
        "--rate",
        "12e6",
    )
    kinds = [e["event"] for e in events]
    assert code == 0 and events[-1]["verdict"] == "ready", events[-3:]
    assert "stall" not in kinds and "stalled" not in kinds
    said = [e for e in events if e["event"] == "activity"]
    assert said and said[0]["phase"] == "load_weights" and said[0]["weights_total_bytes"] == 120 << 20
    assert "reading weights at" in said[0]["message"] and "ETA" in said[0]["message"]
    assert said[0]["read_bps"] > 1e6 and said[0]["eta_s"] is not None
    by_bytes = [e for e in events if e["event"] == "eta" and e.get("basis") == "bytes"]
    assert by_bytes and 0 < by_bytes[0]["progress"] < 1 and by_bytes[0]["eta_s"] > 0


@pytest.mark.slow
def test_run_a_sleeping_server_is_stalled_after_the_stall_time(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    start = time.time()
    code, events = bw(
        tmp_path / "home",
        "run",
        "--json",
        "--log",
        str(tmp_path / "r.log"),
        "--stall",
        "2",
        "--",
        sys.executable,
        LOADER,
        "--model",
        str(model),
        "--sleep",
        "60",
    )
    took = time.time() - start
    assert code == 4 and events[-1]["verdict"] == "stalled"
    stalled = [e for e in events if e["event"] == "stalled"]
    assert stalled and CHECKED in stalled[0]["message"] and stalled[0]["phase"] == "load_weights"
    assert not [e for e in events if e["event"] == "activity"]
    assert 4 <= took < 50  # load_weights' limit is twice --stall


def test_the_live_view_shows_history_and_bytes_etas() -> None:
    from rich.console import Console

    from bootwatch.sinks.live_view import LiveSink

    def shown(sink: LiveSink, now: float) -> str:
        with open(os.devnull, "w") as null:
            cap = Console(width=160, record=True, file=null)
            cap.print(sink.render(now))
            return cap.export_text()

    with open(os.devnull, "w") as null:
        sink = LiveSink(["s"], "x.log", Console(file=null, width=160), clock=lambda: 1010.0)
        try:
            sink.event(PhaseEvent(t=1000.0, name="load_weights", line_no=3, draft=False, text=""), 1000.0)
            sink.event(
                EtaEvent(
                    t=1000.0, phase="load_weights", draft=False, p50_s=250.0, p90_s=360.0, n=5, basis="engine+model"
                ),
                1000.0,
            )
            assert "ETA 4m00s (p90 5m50s) · from 5 startups" in shown(sink, 1010.0)
            sink.event(
                EtaEvent(t=1010.0, phase="load_weights", basis="bytes", eta_s=70.0, progress=0.57),
                1010.0,
            )
            assert "ETA 1m10s (weights read)" in shown(sink, 1010.0)
        finally:
            sink.live.stop()
