"""A watch that attaches to a server that has served for a day skims the serving stretch (issue 20 item 1):
the startup and the latest serving lines are read in full, the lines between only by the rules that are not
serving numbers or startup-only, at RE2's speed. What the skim must never change is the story: on every
real log, a skim of everything after ready tells the same verdict, cause, runtime failure, engine, phases and
facts as a full read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bootwatch.opening import SERVING_TAIL, catch_up
from bootwatch.pipeline import Analyzer, analyze_file, launch_marker, skim_prefilter_for
from bootwatch.serving.detectors import all_detectors
from bootwatch.sources.file import last_launch_offset, scan_back

from .conftest import AFTER_READY, CORPUS

SERVING_KINDS = {d.kind for d in all_detectors(60.0)}
KEPT = ("verdict", "engine", "engine_version", "ready", "failure", "runtime_failure", "phases", "facts", "outcome")


def _read(path: Path, skim: bool) -> dict[str, Any]:
    analyzer = Analyzer()
    if skim:
        analyzer.skim_until = 1 << 62  # everything after ready
    with path.open("rb") as f:
        analyze_file(f, analyzer, str(path))
    analyzer.finish()
    return analyzer.summary().to_json()


def _story(s: dict[str, Any]) -> dict[str, Any]:
    out = {k: s.get(k) for k in KEPT}
    for k in ("failure", "runtime_failure"):
        if out[k] is not None:
            # the lines before it: a full read shows the serving lines there, a skim the others it read
            out[k] = {key: v for key, v in out[k].items() if key != "context"}
    out["warnings"] = [w for w in s["warnings"] if w["kind"] not in SERVING_KINDS]
    return out


LOGS = sorted(CORPUS.glob("*/*.log")) + sorted(AFTER_READY.glob("*.log"))


@pytest.mark.parametrize("path", LOGS, ids=[f"{p.parent.name}/{p.stem}" for p in LOGS])
def test_a_skim_after_ready_tells_the_same_story_as_a_full_read(path: Path) -> None:
    full = _read(path, skim=False)
    if full["verdict"] != "ready" and full.get("serving") is None:
        return  # never ready: nothing to skim (the skim starts at a ready line)
    assert _story(_read(path, skim=True)) == _story(full)


VLLM_HEAD = (
    b"INFO 11-18 17:10:46 api_server.py:585] vLLM API server version 0.6.4.post1\n"
    b"INFO 11-18 17:10:47 model_runner.py:1072] Starting to load model /models/x...\n"
    b"INFO:     Application startup complete.\n"
)


def _stats(n: int, running: int) -> bytes:
    line = (
        "INFO 11-18 18:{m:02d}:{s:02d} metrics.py:349] Avg prompt throughput: 10.0 tokens/s, Avg generation "
        f"throughput: 900.0 tokens/s, Running: {running} reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: "
        "40.0%, CPU KV cache usage: 0.0%.\n"
    )
    return "".join(line.format(m=i // 60 % 60, s=i % 60) for i in range(n)).encode()


def test_attach_skims_the_middle_and_reads_the_latest_serving_lines(tmp_path: Path) -> None:
    log = tmp_path / "day.log"
    log.write_bytes(VLLM_HEAD + _stats(12000, running=7) + _stats(200, running=3))
    assert log.stat().st_size > 4 * SERVING_TAIL
    analyzer = Analyzer(clock="arrival")
    catch_up(log, analyzer, last_launch_offset(log, launch_marker()))
    s = analyzer.summary().to_json()
    assert s["verdict"] == "ready"
    first, last = s["serving_skimmed_lines"]
    assert 4 <= first < 1000 and 11000 < last < 12203  # from a piece after the ready line to the tail's start
    assert s["serving"]["samples"]["log"] < 1000 and s["serving"]["peak_running"] == 7  # the tail's readings
    latest = [e for e in analyzer.tracker.snapshot() if e.kind == "serving"]
    assert latest and latest[-1].to_json(0.0)["running"] == 3  # the newest numbers


def test_what_comes_live_after_the_attach_is_read_in_full(tmp_path: Path) -> None:
    log = tmp_path / "day.log"
    log.write_bytes(VLLM_HEAD + _stats(6000, running=7))
    analyzer = Analyzer(clock="arrival")
    catch_up(log, analyzer, 0)
    before = analyzer.tracker.serving.summary()
    assert before is not None
    analyzer.feed(_stats(10, running=9), now=1.0)
    after = analyzer.tracker.serving.summary()
    assert after is not None and after["samples"]["log"] == before["samples"]["log"] + 10
    assert after["peak_running"] == 9


def test_a_short_serving_stretch_is_not_skimmed(tmp_path: Path) -> None:
    log = tmp_path / "short.log"
    log.write_bytes(VLLM_HEAD + _stats(50, running=2))
    analyzer = Analyzer(clock="arrival")
    catch_up(log, analyzer, 0)
    s = analyzer.summary().to_json()
    assert "serving_skimmed_lines" not in s and s["serving"]["samples"]["log"] == 50


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_a_catch_up_ends_where_the_partial_last_line_begins_in_the_files_bytes(tmp_path: Path, encoding: str) -> None:
    # The follower resumes where the catch-up ended: an over-long line is fed cut and a UTF-16 file as UTF-8, so
    # counting the bytes fed put that point too early and the follower read bytes again.
    head = VLLM_HEAD.decode() + "x" * (3 << 20) + "\n" + _stats(100, running=2).decode()
    partial = "INFO 11-18 19:00:00 metrics.py:349] Avg prompt throu"
    log = tmp_path / "enc.log"
    log.write_bytes((head + partial).encode(encoding))
    end = catch_up(log, Analyzer(clock="arrival"), 0)
    assert end == log.stat().st_size - len(partial.encode("utf-16-le" if encoding == "utf-16" else encoding))


def _attach(path: Path, tail: int) -> tuple[Analyzer, int]:
    """What `watch` does on attaching: one backward pass, then the catch-up that reads only its hits in the
    serving stretch (all of it but the last `tail` bytes)."""
    scan = scan_back(path, launch_marker(), skim_prefilter_for().line_starts)
    assert scan is not None
    analyzer = Analyzer()
    end = catch_up(path, analyzer, scan.start, scan, tail=tail)
    analyzer.finish()
    return analyzer, end


def _full_from(path: Path, start: int) -> dict[str, Any]:
    analyzer = Analyzer()
    with path.open("rb") as f:
        f.seek(start)
        analyzer.next_no = path.read_bytes()[:start].count(b"\n") + 1
        analyze_file(f, analyzer, str(path), complete_only=True)  # as a catch-up: a partial last line waits
    analyzer.mark_caught_up()
    analyzer.finish()
    return analyzer.summary().to_json()


@pytest.mark.parametrize("path", LOGS, ids=[f"{p.parent.name}/{p.stem}" for p in LOGS])
def test_an_attach_by_the_backward_pass_tells_the_same_story_as_a_full_read(path: Path) -> None:
    # tail=0: everything after the ready line is read only where the backward pass hit, the hardest case
    scan = scan_back(path, launch_marker(), skim_prefilter_for().line_starts)
    if scan is None:
        return  # a BOM or NUL runs: the attach reads forward, as test_a_skim_after_ready... checks
    attached, end = _attach(path, tail=0)
    full = _full_from(path, scan.start)
    assert _story(attached.summary().to_json()) == _story(full)
    size = path.stat().st_size
    assert end == size or not path.read_bytes().endswith(b"\n")  # the follower resumes at the end


def _traceback(no: int) -> bytes:
    return (
        f"ERROR 11-18 19:00:{no:02d} serving_chat.py:200] Error in chat completion\n"
        "Traceback (most recent call last):\n"
        '  File "/app/vllm/entrypoints/openai/serving_chat.py", line 190, in create_chat_completion\n'
        "    raise ValueError('prompt too long')\n"
        "ValueError: prompt too long\n"
    ).encode()


def test_an_attach_reads_a_traceback_in_the_serving_stretch_whole_and_numbers_every_line(tmp_path: Path) -> None:
    log = tmp_path / "day.log"
    log.write_bytes(VLLM_HEAD + _stats(6000, running=7) + _traceback(1) + _stats(6000, running=5) + _stats(40, 3))
    attached, end = _attach(log, tail=SERVING_TAIL)
    s = attached.summary().to_json()
    full = _full_from(log, 0)
    assert _story(s) == _story(full) and end == log.stat().st_size
    assert s["lines"] == full["lines"] == 12048 and s["last_line_no"] == full["last_line_no"]
    first, last = s["serving_skimmed_lines"]
    assert 4 <= first < 1000 and 11000 < last < 12048
    # the newest numbers, at the line numbers a full read gives them
    latest = [e.to_json(0.0) for e in attached.tracker.snapshot() if e.kind == "serving"]
    assert latest and latest[-1]["running"] == 3 and latest[-1]["line_no"] == full["last_line_no"]


def test_a_death_in_the_serving_stretch_ends_the_skip_and_the_rest_is_read_whole(tmp_path: Path) -> None:
    death = (
        b"ERROR 11-18 19:00:03 engine.py:300] Engine core proc EngineCore_0 died unexpectedly, shutting down client.\n"
    )
    log = tmp_path / "died.log"
    log.write_bytes(VLLM_HEAD + _stats(6000, running=7) + death + _stats(3000, running=0))
    attached, _ = _attach(log, tail=SERVING_TAIL)
    s = attached.summary().to_json()
    assert _story(s) == _story(_full_from(log, 0))
    assert s["runtime_failure"] is not None and s["runtime_failure"]["line_no"] == 6004


def test_the_backward_pass_gives_up_where_a_forward_read_must_decide(tmp_path: Path) -> None:
    marker, starts = launch_marker(), skim_prefilter_for().line_starts
    nuls = tmp_path / "two-writers.log"
    nuls.write_bytes(VLLM_HEAD + b"\x00" * 64 + VLLM_HEAD)
    assert scan_back(nuls, marker, starts) is None
    utf16 = tmp_path / "utf16.log"
    utf16.write_bytes(VLLM_HEAD.decode().encode("utf-16"))
    assert scan_back(utf16, marker, starts) is None
    errors = tmp_path / "errors.log"
    errors.write_bytes(VLLM_HEAD + _traceback(2) * 50)
    assert scan_back(errors, marker, starts, max_hits=100) is None
    assert scan_back(errors, marker, starts) is not None
