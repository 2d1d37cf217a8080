"""A server that loads models on demand once it is up (Ollama: a runner per model) says where each load begins;
the summary names the latest load's ready line beside the launch's readiness (the first load's, the one the
event stream said). A load that says "started" twice is one load."""

from __future__ import annotations

from pathlib import Path

from bootwatch.pipeline import Analyzer, analyze_path

# Ollama 0.13's own lines (tests/corpus/ollama/0.13.5-hpc-...): the API, then each load and its echo
LISTEN = 'time=2026-01-23T15:30:37.500-05:00 level=INFO source=routes.go:1615 msg="Listening on 127.0.0.1:11434 (version 0.13.5)"'


def _load(minute: int, secs: str, echo: bool = False) -> list[str]:
    t = f"2026-01-23T15:{minute:02d}"
    out = [
        f'time={t}:42.345-05:00 level=INFO source=server.go:746 msg="loading model" "model layers"=13 requested=-1',
        f'time={t}:46.108-05:00 level=INFO source=sched.go:517 msg="loaded runners" count=1',
        f'time={t}:46.108-05:00 level=INFO source=server.go:1338 msg="waiting for llama runner to start responding"',
        f'time={t}:48.372-05:00 level=INFO source=server.go:1376 msg="llama runner started in {secs} seconds"',
    ]
    if echo:  # the scheduler waits for the same runner again and says so twice
        out += [
            f'time={t}:48.372-05:00 level=INFO source=sched.go:517 msg="loaded runners" count=1',
            f'time={t}:48.373-05:00 level=INFO source=server.go:1338 msg="waiting for llama runner to start responding"',
            f'time={t}:48.373-05:00 level=INFO source=server.go:1376 msg="llama runner started in {secs} seconds"',
        ]
    return out


def _summary(tmp_path: Path, lines: list[str]) -> dict:
    log = tmp_path / "ollama.log"
    log.write_text("\n".join(lines) + "\n")
    return analyze_path(log)


def test_the_latest_load_is_named_beside_the_first(tmp_path: Path) -> None:
    lines = [LISTEN, *_load(35, "6.03"), *_load(41, "0.60", echo=True), *_load(50, "4.15")]
    s = _summary(tmp_path, lines)
    assert s["verdict"] == "ready" and s["ready"]["text"].endswith('"llama runner started in 6.03 seconds"')
    assert s["server_ready"]["line_no"] == 1
    assert s["model_loads"]["count"] == 3  # the echo of the second load is not a load
    assert s["model_loads"]["last"] == {"line_no": len(lines), "text": '"llama runner started in 4.15 seconds"'}


def test_a_load_said_twice_is_one_load_at_its_first_line(tmp_path: Path) -> None:
    lines = [LISTEN, *_load(35, "0.80", echo=True)]
    s = _summary(tmp_path, lines)
    assert s["model_loads"] == {"count": 1, "last": {"line_no": 5, "text": '"llama runner started in 0.80 seconds"'}}
    assert s["ready"]["line_no"] == 5


def test_later_loads_begin_no_launch(tmp_path: Path) -> None:
    analyzer = Analyzer()
    events = analyzer.feed(
        ("\n".join([LISTEN, *_load(35, "6.03"), *_load(41, "0.60"), *_load(50, "4.15")]) + "\n").encode()
    )
    # the first load is a launch of its own (the API's readiness kept as server_ready); later ones are serving
    assert [e.to_json(0.0)["line_no"] for e in events if e.kind == "launch"] == [4]  # its "waiting for" line
    assert analyzer.summary().to_json()["model_loads"]["count"] == 3


def test_a_server_without_loads_has_none(tmp_path: Path) -> None:
    assert _summary(tmp_path, [LISTEN])["model_loads"] is None
