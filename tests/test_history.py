"""The history store: real SQLite files in a temp home, real bootwatch processes writing and reading them."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bootwatch.pipeline import analyze_path
from bootwatch.store import (
    KEEP,
    Command,
    Match,
    StoredPhase,
    StoredStartup,
    key_args,
    open_store,
    similar,
    startup_from_summary,
)
from bootwatch.store.model import ROOT_CAUSE_CAP
from bootwatch.store.schema import VERSION
from tests.conftest import CORPUS

BOOTWATCH = [sys.executable, "-m", "bootwatch"]
READY_LOG = CORPUS / "sglang/docs-2025-02-eagle2-llama2-two-captures-ready.log"
FAILED_LOG = CORPUS / "sglang/rocm-rdna4-tp2-oom-during-weight-load-one-rank.log"
HF_TOKEN = "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3f"
SK_KEY = "sk-proj-" + "Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1"

# A bootwatch process that records one startup, as `watch` does when it ends. With a barrier directory it
# says it is ready (its imports done) and waits for "go", so that all writers hit the store at once.
RECORD = """
import json, os, sys, time
from bootwatch.sinks import history
summary_file, source = sys.argv[1], sys.argv[2]
barrier = sys.argv[3] if len(sys.argv) > 3 else None
summary = json.loads(open(summary_file).read())
if barrier:
    open(os.path.join(barrier, f"ready-{os.getpid()}"), "w").close()
    while not os.path.exists(os.path.join(barrier, "go")):
        time.sleep(0.002)
history.record(summary, source, "watch")
"""


def env_for(home: Path) -> dict[str, str]:
    return {**os.environ, "BOOTWATCH_HOME": str(home)}


def summary_of(log: Path, **changes: Any) -> dict[str, Any]:
    s = analyze_path(str(log))
    s["elapsed_s"] = 12.5
    s.update(changes)
    return s


def write_summary(tmp_path: Path, summary: dict[str, Any], name: str = "summary.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(summary))
    return p


def record_in_process(
    home: Path, summary_file: Path, source: str = "/var/log/server.log", preexec: Any = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RECORD, str(summary_file), source],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=preexec,
    )


def history_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BOOTWATCH, "history", *args], env=env_for(home), capture_output=True, text=True, timeout=60)


def history_json(home: Path, *args: str) -> list[dict[str, Any]]:
    p = history_cli(home, "--json", *args)
    assert p.returncode == 0, p.stderr
    return [json.loads(line) for line in p.stdout.splitlines()]


def rows(home: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with sqlite3.connect(home / "history.sqlite3") as db:
        return db.execute(sql, params).fetchall()


def startup(
    engine: str = "sglang",
    model: str | None = "org/model-a",
    args: dict[str, Any] | None = None,
    verdict: str = "ready",
    host: str = "gpu1",
    load_s: float = 30.0,
) -> StoredStartup:
    return StoredStartup(
        started_at=1000.0,
        ended_at=1100.0,
        host=host,
        source=f"ssh://{host}/var/log/s.log",
        command=Command.WATCH,
        engine=engine,
        verdict=verdict,
        model=model,
        args=key_args(args or {"tp_size": 1}),
        time_to_ready_s=load_s + 10 if verdict == "ready" else None,
        phases=(
            StoredPhase("start", False, 0.0, 10.0),
            StoredPhase("load_weights", False, 10.0, load_s, 1.0),
            StoredPhase("ready", False, 10.0 + load_s, 0.0, 1.0),
        ),
    )


# ---- the file ------------------------------------------------------------------------------------------------
def test_store_is_private_versioned_and_wal_even_under_umask_0(tmp_path: Path) -> None:
    home = tmp_path / "deep" / "home"
    summary_file = write_summary(tmp_path, summary_of(READY_LOG))
    p = record_in_process(home, summary_file, preexec=lambda: os.umask(0))
    assert p.returncode == 0 and p.stderr == ""
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "deep").stat().st_mode) == 0o700  # a parent it made too: not 0777
    db_file = home / "history.sqlite3"
    assert stat.S_IMODE(db_file.stat().st_mode) == 0o600
    assert rows(home, "PRAGMA user_version") == [(VERSION,)]
    assert rows(home, "PRAGMA journal_mode") == [("wal",)]
    # While a connection is open the -wal and -shm files exist: SQLite gives them the database's mode.
    with open_store(home) as store:
        store.add(startup())
        for side in ("history.sqlite3-wal", "history.sqlite3-shm"):
            assert stat.S_IMODE((home / side).stat().st_mode) == 0o600, side


def test_one_row_per_startup_with_its_phases(tmp_path: Path) -> None:
    home = tmp_path / "home"
    summary = summary_of(READY_LOG)
    p = record_in_process(home, write_summary(tmp_path, summary), source="ssh://ops@gpu7/var/log/sglang.log")
    assert p.returncode == 0, p.stderr
    (row,) = rows(
        home, "SELECT id, host, command, engine, model, args, verdict, time_to_ready_s, ready_line_no FROM startups"
    )
    sid, host, command, engine, model, args, verdict, to_ready, ready_line = row
    assert (host, command, engine, verdict) == ("gpu7", "watch", "sglang", "ready")
    assert model == summary["facts"]["model"] and ready_line == summary["ready"]["line_no"]
    assert json.loads(args)["tp_size"] == 1 and json.loads(args)["speculative_algorithm"] == "EAGLE"
    phases = rows(
        home,
        "SELECT seq, name, draft, start_offset_s, duration_s FROM phases WHERE startup_id = ? ORDER BY seq",
        (sid,),
    )
    assert [(name, bool(draft)) for _, name, draft, _, _ in phases] == [
        (ph["name"], bool(ph.get("draft"))) for ph in summary["phases"]
    ]
    assert [d for *_, d in phases] == [ph["duration_s"] for ph in summary["phases"]]
    # Phases follow one another: the ready phase starts where the time to ready ends.
    assert phases[-1][1] == "ready" and phases[-1][3] == to_ready == sum(ph[4] for ph in phases[:-1])


def test_history_json_and_table(tmp_path: Path) -> None:
    home = tmp_path / "home"
    record_in_process(home, write_summary(tmp_path, summary_of(READY_LOG)))
    record_in_process(home, write_summary(tmp_path, summary_of(FAILED_LOG), "f.json"))
    entries = history_json(home)
    assert [e["verdict"] for e in entries] == ["ready", "failed"]  # oldest first
    assert entries[1]["root_cause"].startswith("torch.OutOfMemoryError")
    assert entries[1]["root_cause_category"] and entries[1]["time_to_ready_s"] is None
    assert {"name", "draft", "start_offset_s", "duration_s", "progress"} <= set(entries[0]["phases"][0])
    assert [e["verdict"] for e in history_json(home, "--limit", "1")] == ["failed"]
    table = history_cli(home)
    assert table.returncode == 0 and "meta-llama/Llama-2-7b-chat-hf" in table.stdout
    assert "torch.OutOfMemoryError" in table.stdout and "load_weights=3.0s" in table.stdout


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE startups SET started_at = 'yesterday' WHERE id = 1",  # text in a REAL column (a hand edit)
        "UPDATE startups SET ended_at = 1e300 WHERE id = 1",  # beyond what localtime can show
        "UPDATE startups SET started_at = x'00ff', host = 42 WHERE id = 1",  # a blob; a number in a TEXT column
    ],
)
def test_one_bad_row_is_skipped_with_one_note_and_history_still_works(tmp_path: Path, damage: str) -> None:
    home = tmp_path / "home"
    record_in_process(home, write_summary(tmp_path, summary_of(READY_LOG)))
    record_in_process(home, write_summary(tmp_path, summary_of(FAILED_LOG), "f.json"))
    record_in_process(home, write_summary(tmp_path, summary_of(READY_LOG), "r2.json"), "/var/log/other.log")
    with sqlite3.connect(home / "history.sqlite3") as db:  # the real file, as another program would change it
        db.execute(damage)
        db.execute("UPDATE startups SET elapsed_s = 'long', time_to_ready_s = 'soon' WHERE id = 2")
        db.execute("UPDATE phases SET duration_s = 'a while' WHERE startup_id = 2")
    html = tmp_path / "h.html"
    for args in ([], ["--json"], ["--html", str(html)], ["--suggest-probes"], ["--compare", "1", "2"]):
        p = history_cli(home, *args)
        assert "internal error" not in p.stderr, (args, p.stderr)  # was TypeError, OverflowError
        assert p.returncode == (2 if "--compare" in args else 0), (args, p.stderr)  # row 1 is none to compare
        assert p.stderr.count("skipped a history row") == 1, (args, p.stderr)
    assert history_cli(home, "--compare", "2", "3").returncode == 0
    assert [e["id"] for e in history_json(home)] == [2, 3]  # row 2's bad numbers are unknown, not fatal
    assert history_json(home)[0]["elapsed_s"] is None
    assert html.stat().st_size > 0


def test_a_legacy_entry_at_an_impossible_time_is_not_imported(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    ok = {"time": 1700000000.0, "command": "run", "verdict": "ready", "engine": "vllm"}
    lines = [{"time": 1e300, "command": "run", "verdict": "ready"}, {"time": -5.0, "command": "run"}, ok]
    (home / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    assert [e["started_at"] for e in history_json(home)] == [1700000000.0]  # was imported, then OverflowError
    table = history_cli(home)
    assert table.returncode == 0 and "vllm" in table.stdout, table.stderr


def test_history_of_nothing_and_bad_limit(tmp_path: Path) -> None:
    p = history_cli(tmp_path / "home")
    assert p.returncode == 0 and "no startups recorded yet" in p.stdout
    bad = history_cli(tmp_path / "home", "--limit", "0")
    assert bad.returncode == 2 and bad.stderr.startswith("bootwatch: --limit 0") and "Traceback" not in bad.stderr


def record_at_once(home: Path, summary_file: Path, barrier: Path, sources: list[str]) -> list[str]:
    """Start one recording process per source, let them all write at the same moment; their stderr."""
    barrier.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RECORD, str(summary_file), source, str(barrier)],
            env=env_for(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for source in sources
    ]
    deadline = time.monotonic() + 60
    while len(list(barrier.glob("ready-*"))) < len(procs) and time.monotonic() < deadline:
        time.sleep(0.01)
    (barrier / "go").touch()
    errs = []
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        errs.append(err)
    return errs


# ---- concurrency -------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    """10 processes record at the same moment, 5 rounds; the first round also creates the store and imports
    an old history.jsonl, which must happen exactly once."""
    home = tmp_path / "home"
    home.mkdir()
    legacy = [
        {
            "time": 1000.0 + i,
            "command": "run",
            "source": f"legacy-{i}",
            "verdict": "ready",
            "engine": "vllm",
            "model": "m",
            "elapsed_s": 5.0,
            "phases": {"load_weights": 3.0},
        }
        for i in range(3)
    ]
    (home / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in legacy))
    summary_file = write_summary(tmp_path, summary_of(READY_LOG))
    expected = {f"legacy-{i}" for i in range(3)}
    for r in range(5):
        names = [f"round{r}-writer{i}" for i in range(10)]
        assert record_at_once(home, summary_file, tmp_path / f"barrier-{r}", names) == [""] * 10
        expected |= set(names)
        sources = [s for (s,) in rows(home, "SELECT source FROM startups")]
        assert sorted(sources) == sorted(expected), f"round {r}"
    per_startup = rows(home, "SELECT count(*) FROM phases GROUP BY startup_id")
    assert len(per_startup) == 53 and {n for (n,) in per_startup} == {1, len(summary_of(READY_LOG)["phases"])}
    assert not (home / "history.jsonl").exists() and (home / "history.jsonl.imported").exists()


# ---- damage ----------------------------------------------------------------------------------------------------
def _garbage(db: Path) -> None:
    db.write_bytes(b"this is not a database\x00\xff" * 400)


def _truncated(db: Path) -> None:
    with open_store(db.parent) as store:
        for _ in range(200):
            store.add(startup())
    os.truncate(db, db.stat().st_size // 2)


def _directory(db: Path) -> None:
    db.mkdir()
    (db / "something").write_text("x")


@pytest.mark.parametrize("damage", [_garbage, _truncated, _directory], ids=["garbage", "truncated", "directory"])
def test_corrupt_store_is_moved_aside_once_and_recording_goes_on(tmp_path: Path, damage: Any) -> None:
    home = tmp_path / "home"
    home.mkdir()
    damage(home / "history.sqlite3")
    summary_file = write_summary(tmp_path, summary_of(READY_LOG))
    p = record_in_process(home, summary_file)
    assert p.returncode == 0
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and "history store" in lines[0] and "is corrupt" in lines[0], p.stderr
    aside = [x for x in home.iterdir() if ".corrupt-" in x.name and not x.name.endswith("-wal")]
    assert len(aside) == 1 and f"moved aside to {aside[0]}" in lines[0]
    assert rows(home, "SELECT count(*) FROM startups") == [(1,)]
    again = record_in_process(home, summary_file, "/var/log/next.log")  # the fresh store is fine: nothing more said
    assert again.returncode == 0 and again.stderr == ""
    assert len(history_json(home)) == 2


@pytest.mark.slow
def test_writers_meeting_a_corrupt_store_at_once_move_it_aside_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _garbage(home / "history.sqlite3")
    names = [f"writer{i}" for i in range(10)]
    errs = record_at_once(home, write_summary(tmp_path, summary_of(READY_LOG)), tmp_path / "barrier", names)
    assert sum(e.count("is corrupt") for e in errs) == 1 and all("note" not in e for e in errs), errs
    assert len([x for x in home.iterdir() if ".corrupt-" in x.name]) == 1
    assert sorted(s for (s,) in rows(home, "SELECT source FROM startups")) == names


def test_history_on_a_corrupt_store_says_so_and_shows_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _garbage(home / "history.sqlite3")
    p = history_cli(home)
    assert p.returncode == 0 and "no startups recorded yet" in p.stdout
    assert p.stderr.count("is corrupt") == 1 and "Traceback" not in p.stderr


def test_unwritable_home_is_a_note_never_a_failure(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the home's parent should be")
    home = blocker / "home"
    p = record_in_process(home, write_summary(tmp_path, summary_of(READY_LOG)))
    assert p.returncode == 0 and p.stderr.startswith("bootwatch: note: this startup was not added to the history")
    assert len(p.stderr.splitlines()) == 1
    h = history_cli(home)
    assert h.returncode == 2 and h.stderr.startswith("bootwatch: cannot read the history store")
    assert len(h.stderr.splitlines()) == 1


def _file_size_limit(limit: int) -> Any:
    def apply() -> None:
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_full_disk_is_a_note_and_the_store_stays(tmp_path: Path) -> None:
    home = tmp_path / "home"
    summary_file = write_summary(tmp_path, summary_of(READY_LOG))
    assert record_in_process(home, summary_file).returncode == 0
    # No file may grow past what the store already is: the write-ahead log cannot take the new startup.
    p = record_in_process(home, summary_file, preexec=_file_size_limit((home / "history.sqlite3").stat().st_size))
    assert p.returncode == 0 and "bootwatch: note: this startup was not added" in p.stderr
    assert "corrupt" not in p.stderr and not [x for x in home.iterdir() if ".corrupt-" in x.name]
    assert len(history_json(home)) == 1


def test_a_store_from_a_newer_bootwatch_is_left_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with open_store(home) as store:
        store.add(startup())
    with sqlite3.connect(home / "history.sqlite3") as db:
        db.execute(f"PRAGMA user_version = {VERSION + 1}")
    p = record_in_process(home, write_summary(tmp_path, summary_of(READY_LOG)))
    assert p.returncode == 0 and "newer bootwatch" in p.stderr
    h = history_cli(home)
    assert h.returncode == 2 and "newer bootwatch" in h.stderr
    assert rows(home, "SELECT count(*) FROM startups") == [(1,)]


# ---- the old file --------------------------------------------------------------------------------------------
def test_old_jsonl_is_imported_once_skipping_bad_lines(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    good = [
        {
            "time": 1700000000.0 + i,
            "command": "watch",
            "source": f"/logs/{i}.log",
            "verdict": v,
            "engine": "sglang",
            "engine_version": None,
            "model": "qwen/qwen2.5-0.5b-instruct",
            "elapsed_s": 40.0,
            "phases": {"load_weights": 12.0, "cuda_graph_draft": 3.0},
            "failure": f if v == "failed" else None,
            "warnings": [],
        }
        for i, (v, f) in enumerate([("ready", None), ("failed", f"OSError: 401 for token {HF_TOKEN}")])
    ]
    lines = [
        json.dumps(good[0]).encode(),
        b"\xff\xfe not utf-8",
        b"[1, 2, 3]",
        b'"a string"',
        b'{"time": ',
        json.dumps({"command": "watch"}).encode(),
        json.dumps(good[1]).encode()[:40],
        b"",
        json.dumps(good[1]).encode(),
    ]
    (home / "history.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (home / "history.jsonl").chmod(0o644)
    entries = history_json(home)
    assert [(e["source"], e["verdict"]) for e in entries] == [("/logs/0.log", "ready"), ("/logs/1.log", "failed")]
    assert entries[0]["phases"] == [
        {"name": "load_weights", "draft": False, "start_offset_s": None, "duration_s": 12.0, "progress": None},
        {"name": "cuda_graph", "draft": True, "start_offset_s": None, "duration_s": 3.0, "progress": None},
    ]
    assert entries[1]["root_cause"] == "OSError: 401 for token hf_***"
    assert not (home / "history.jsonl").exists()
    assert stat.S_IMODE((home / "history.jsonl.imported").stat().st_mode) == 0o600  # it still holds the token
    assert len(history_json(home)) == 2  # read once: a second look imports nothing more


# ---- what is stored ------------------------------------------------------------------------------------------
def test_secrets_never_reach_the_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    failure = {
        "line_no": 3,
        "text": f"OSError: 401 Client Error for hf token {HF_TOKEN} and key {SK_KEY}",
        "category": "auth",
        "context": [],
    }
    summary = summary_of(FAILED_LOG, failure=failure)
    summary["facts"]["model"] = f"https://user:{SK_KEY}@example.com/model"
    p = record_in_process(home, write_summary(tmp_path, summary), source=f"/logs/run --api-key {SK_KEY}.log")
    assert p.returncode == 0, p.stderr
    (cause,) = rows(home, "SELECT root_cause FROM startups")[0]
    assert cause == "OSError: 401 Client Error for hf token hf_*** and key sk-***"
    raw = b"".join(f.read_bytes() for f in home.iterdir() if f.is_file())
    assert HF_TOKEN.encode() not in raw and SK_KEY.encode() not in raw and b"Zx8Yw7" not in raw
    assert HF_TOKEN not in history_cli(home).stdout


def test_markup_in_stored_text_is_shown_as_is(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cause = "RuntimeError: bad tag [/] then [bold red]loud[/bold red] and [link=file:///etc]x[/link] \x1b[2J"
    summary = summary_of(FAILED_LOG, failure={"line_no": 3, "text": cause, "category": "other", "context": []})
    summary["facts"]["model"] = "[/]org/[red]model"
    record_in_process(home, write_summary(tmp_path, summary), source="/logs/[/]weird.log")
    p = history_cli(home)
    assert p.returncode == 0 and "Traceback" not in p.stderr
    assert "[/]org/[red]model" in p.stdout and "[/]weird.log" in p.stdout
    assert "RuntimeError: bad tag [/] then [bold red]" in p.stdout and "\x1b" not in p.stdout


def test_rows_are_bounded_in_number_and_size(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with open_store(home, keep=20) as store:
        ids = [store.add(startup(load_s=float(i))) for i in range(30)]
        assert store.count() == 20
        assert [s.id for s in store.recent(100)] == ids[10:]
        # The pruned startups' phases went with them, in the same transaction.
        assert store.db.execute("SELECT min(startup_id), count(*) FROM phases").fetchone() == (ids[10], 60)
    assert KEEP >= 1000
    huge = summary_of(
        FAILED_LOG,
        failure={
            "line_no": 1,
            "text": "RuntimeError: " + "x" * 500_000,
            "category": "other",
            "context": ["y" * 100_000] * 5,
        },
    )
    huge["facts"]["model"] = "m" * 100_000
    s = startup_from_summary(huge, "/logs/" + "z" * 100_000, "run", time.time())
    assert s.root_cause is not None and len(s.root_cause) == ROOT_CAUSE_CAP and s.root_cause.endswith("…")
    assert s.model is not None and len(s.model) <= 512 and len(s.source) <= 512
    other = tmp_path / "other"
    with open_store(other) as store:
        store.add(s)
    assert sum(f.stat().st_size for f in other.iterdir()) < 64 * 1024


# ---- similar ---------------------------------------------------------------------------------------------------
def test_similar_finds_the_closest_kind_of_past_startup(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with open_store(home) as store:
        a_tp1 = store.add(startup(args={"tp_size": 1, "dtype": "bfloat16"}, load_s=30))
        a_tp2 = store.add(startup(args={"tp_size": 2, "dtype": "bfloat16"}, load_s=20))
        store.add(startup(args={"tp_size": 1, "dtype": "bfloat16"}, verdict="failed"))
        a_tp1_again = store.add(startup(args={"tp_size": 1, "dtype": "bfloat16"}, load_s=32))
        b = store.add(startup(model="org/model-b", load_s=50))
        store.add(startup(args={"tp_size": 1, "dtype": "bfloat16"}, host="gpu2", load_s=90))
        vllm = store.add(startup(engine="vllm", host="gpu2"))

    # The same settings, given as a summary's facts (extra facts such as the port do not matter).
    facts = {"model": "org/model-a", "tp_size": 1, "dtype": "bfloat16", "port": 30000, "kv_cache_tokens": 123}
    got = similar("sglang", "org/model-a", facts, "gpu1", 10, base=home)
    assert got.match is Match.ARGS and [s.id for s in got.startups] == [a_tp1_again, a_tp1]  # ready only, newest first
    load = [p.duration_s for p in got.startups[0].phases if p.name == "load_weights"]
    assert load == [32.0]

    # Another TP size is another kind of startup: nothing to learn from.
    assert similar("sglang", "org/model-a", {"tp_size": 8}, "gpu1", 10, base=home).match is None
    # Started the same way (parallelism, speculation, graphs), another dtype or context: close enough.
    got = similar("sglang", "org/model-a", {"tp_size": 2, "dtype": "float16"}, "gpu1", 10, base=home)
    assert got.match is Match.MODEL and [s.id for s in got.startups] == [a_tp2]
    got = similar("sglang", "org/model-a", {"tp_size": 1}, "gpu1", 10, base=home)
    assert got.match is Match.MODEL and [s.id for s in got.startups] == [a_tp1_again, a_tp1]
    # Never another model's startups (a 7B EAGLE startup judged against 0.5B ones).
    assert similar("sglang", "org/model-c", {"tp_size": 1}, "gpu1", 10, base=home).match is None
    assert similar("sglang", "org/model-c", {}, "gpu1", 10, base=home).startups == ()
    # A setting the log has not stated (yet) is its default: tp_size 1.
    assert [s.id for s in similar("sglang", "org/model-b", {}, "gpu1", 10, base=home).startups] == [b]
    assert similar("sglang", "org/model-b", {"speculative_algorithm": "EAGLE"}, "gpu1", 10, base=home).match is None

    got = similar("sglang", "org/model-a", facts, None, 10, base=home)  # any host
    assert got.match is Match.ARGS and len(got.startups) == 3
    assert similar("vllm", "org/model-a", {}, "gpu1", 10, base=home).match is None
    assert [s.id for s in similar("vllm", "org/model-a", {}, "gpu2", 10, base=home).startups] == [vllm]
    assert similar("tgi", "org/model-a", facts, "gpu1", 10, base=home).startups == ()


# ---- the log's own clock, one row per launch -------------------------------------------------------------------
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "vllm-cpu-ready.log"


def watch_from_start(log: Path, home: Path) -> dict[str, Any]:
    """`watch --from-start LOG --json`'s summary, with its own history in `home`."""
    p = subprocess.run(
        [*BOOTWATCH, "watch", "--from-start", str(log), "--json", "--timeout", "30s"],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.splitlines()[-1])


def test_catch_up_reads_keep_the_logs_time_and_one_row_per_launch(tmp_path: Path) -> None:
    """Three `watch --from-start` reads of a finished log: one startup in the history, timed by the log's own
    clock (31 s to ready, as `report` says), and a probe suggestion that leaves it at least that long."""
    home = tmp_path / "home"
    for _ in range(3):
        summary = watch_from_start(EXAMPLE, home)
        assert summary["caught_up"] is True
        assert {ph["name"]: ph["duration_s"] for ph in summary["phases"]}["config"] == 29.0
    (row,) = history_json(home)
    assert row["time_to_ready_s"] == 31.0 and row["caught_up"] is True and row["elapsed_s"] == 31.0
    assert row["ended_at"] - row["started_at"] == pytest.approx(31.0)
    suggested = history_cli(home, "--suggest-probes")
    threshold = int(suggested.stdout.split("failureThreshold: ")[1].split()[0])
    period = int(suggested.stdout.split("periodSeconds: ")[1].split()[0])
    assert threshold * period >= 31


def test_a_catch_up_read_without_timestamps_has_no_durations(tmp_path: Path) -> None:
    """A log whose lines carry no time, read at once: how long its phases took is unknown, not 0.0 s."""
    log = tmp_path / "llama.log"
    log.write_text(
        "main: build = 4000 (abc)\n"
        "llama_model_loader: loaded meta data with 20 key-value pairs from m.gguf\n"
        "llm_load_tensors: offloading 32 repeating layers to GPU\n"
        "llama_new_context_with_model: n_ctx = 2048\n"
        "main: server is listening on http://127.0.0.1:8080 - starting the main loop\n"
    )
    home = tmp_path / "home"
    summary = watch_from_start(log, home)
    assert summary["verdict"] == "ready" and summary["caught_up"] is True
    assert [ph["duration_s"] for ph in summary["phases"]] == [None] * len(summary["phases"])
    (row,) = history_json(home)
    assert row["time_to_ready_s"] is None and row["elapsed_s"] is None
    assert "no ready startup" in history_cli(home, "--suggest-probes").stdout


def _keyed(verdict: str, caught_up: bool, load_s: float = 30.0) -> StoredStartup:
    s = startup(verdict=verdict, load_s=load_s)
    return StoredStartup(**{**s.__dict__, "launch_key": "k1", "caught_up": caught_up})


@pytest.mark.parametrize(
    ("first", "second", "kept"),
    [
        (("ready", True), ("ready", True), 0),  # the same launch read twice: the first row stays
        (("ready", True), ("ready", False), 1),  # a live read knows more than a catch-up
        (("ready", False), ("ready", True), 0),
        (("incomplete", False), ("ready", True), 1),  # it ended since: the ended startup
        (("failed", True), ("timeout", False), 0),
    ],
)
def test_one_launch_is_one_row(tmp_path: Path, first: tuple[str, bool], second: tuple[str, bool], kept: int) -> None:
    home = tmp_path / "home"
    rows_in = [_keyed(*first, load_s=30.0), _keyed(*second, load_s=40.0)]
    with open_store(home) as store:
        store.add(rows_in[0])
        store.add(rows_in[1])
        store.add(startup())  # no key: always its own row
        got = store.recent(10)
    assert len(got) == 2
    keyed = next(s for s in got if s.launch_key == "k1")
    assert (keyed.verdict, keyed.caught_up, keyed.time_to_ready_s) == (
        rows_in[kept].verdict,
        rows_in[kept].caught_up,
        rows_in[kept].time_to_ready_s,
    )


def test_etas_compare_like_with_like_and_never_quote_no_time(tmp_path: Path) -> None:
    from bootwatch.insight.eta import book_from

    home = tmp_path / "home"
    with open_store(home) as store:
        store.add(startup(args={"tp_size": 1, "dtype": "bfloat16"}, load_s=30))
    # Exactly these settings: one past startup is enough.
    exact = similar("sglang", "org/model-a", {"tp_size": 1, "dtype": "bfloat16"}, "gpu1", 10, base=home)
    book = book_from(exact)
    assert book is not None and book.phases["load_weights"].p50_s == 30.0
    # Only alike (another dtype): one is not enough, three are.
    alike = {"tp_size": 1, "dtype": "float16"}
    assert book_from(similar("sglang", "org/model-a", alike, "gpu1", 10, base=home)) is None
    with open_store(home) as store:
        for load in (0.0, 0.0):
            store.add(startup(args={"tp_size": 1, "dtype": "bfloat16"}, load_s=load))
    book = book_from(similar("sglang", "org/model-a", alike, "gpu1", 10, base=home))
    assert book is not None and book.n == 3
    # A median of no time at all is not quoted: the 0-s load_weights median gives no ETA and no regression.
    assert "load_weights" not in book.phases
