"""A server's own "starting the server on …" line, when its HTTP framework's lines are missing (vLLM's logger kept
alone, Xinference's uvicorn under its log level): ready at that line once something confirms it — serving numbers
after it, a quiet spell with nothing saying the server died, or the end of a recorded log — and never when a bind
error follows it or the framework's own ready line comes (that line is the readiness then)."""

from __future__ import annotations

from pathlib import Path

from bootwatch.pipeline import Analyzer, analyze_path

from .conftest import CORPUS

VLLM = CORPUS / "vllm" / "v0.8.3-4090d-r1-distill-qwen-1.5b-no-uvicorn-lines-then-shutdown-ready.log"
STARTING = "INFO 04-14 06:02:33 [api_server.py:1081] Starting vLLM API server on http://0.0.0.0:8000"
BIND = "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use"
# What the summary shows of a line: its message, the log's prefix removed
STARTED = STARTING.split("] ", 1)[1]
BIND_ERROR = BIND.split("    ", 1)[1]


def _head() -> list[str]:
    lines = VLLM.read_text("utf-8").split("\n")
    return lines[: lines.index(STARTING) + 1]


def _report(tmp_path: Path, lines: list[str]) -> dict:
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(lines) + "\n")
    return analyze_path(log)


def test_serving_numbers_confirm_the_starting_line_as_the_readiness() -> None:
    s = analyze_path(VLLM)
    assert s["verdict"] == "ready", s
    assert s["ready"] == {"line_no": len(_head()), "text": STARTED, "how": s["ready"]["how"]}


def test_a_recorded_log_that_ends_at_the_starting_line_was_ready_there(tmp_path: Path) -> None:
    s = _report(tmp_path, _head())
    assert s["verdict"] == "ready" and s["ready"]["text"] == STARTED, s
    assert "no uvicorn line followed" in s["ready"]["how"]


def test_a_bind_error_after_the_starting_line_is_the_failure(tmp_path: Path) -> None:
    s = _report(tmp_path, [*_head(), BIND])
    assert s["verdict"] == "failed" and s.get("ready") is None, s
    assert s["failure"]["text"] == BIND_ERROR


def test_uvicorns_ready_line_after_it_is_the_readiness(tmp_path: Path) -> None:
    done = "INFO:     Application startup complete."
    s = _report(
        tmp_path, [*_head(), "INFO:     Started server process [1]", "INFO:     Waiting for application startup.", done]
    )
    assert s["verdict"] == "ready" and s["ready"]["text"] == done.split(maxsplit=1)[1], s


def _live(lines: list[str]) -> Analyzer:
    a = Analyzer(clock="arrival")
    a.feed(("\n".join(lines) + "\n").encode(), now=100.0)
    return a


def test_live_a_quiet_spell_confirms_it_unless_the_server_is_gone() -> None:
    a = _live(_head())
    tracker = a.tracker
    assert tracker.settle(101.0) == [] and tracker.launch is not None and tracker.launch.ready is None
    tracker.settle(106.0, server_alive=False)  # it exited: whatever that means, it was not a ready server
    assert tracker.launch.ready is None
    tracker.settle(106.0)
    assert tracker.launch.ready is not None and tracker.launch.ready.text == STARTED


def test_live_a_bind_error_within_the_quiet_spell_wins() -> None:
    a = _live([*_head(), BIND])
    a.tracker.settle(110.0)
    assert a.tracker.launch is not None and a.tracker.launch.ready is None
    assert a.tracker.launch.failure is not None and a.tracker.launch.failure.text == BIND_ERROR
