"""Appended and interleaved logs: a NUL run splits launches (a log truncated under its writer, or another writer's
appends), a bind error once a server is up is another instance's failure, and an Ollama log's summary gives both
the API's readiness and the last model load's; a server started again in the same log (a ready launch, then one
that fails) is judged by its new launch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bootwatch.pipeline import analyze_path

from .conftest import CORPUS

SERVER_CONFIG = (
    'time=2025-03-05T06:58:50.117Z level=INFO source=routes.go:1631 msg="server config" env="map[OLLAMA_HOST:]"\n'
)
LISTENING = 'time=2025-03-05T06:58:54.117Z level=INFO source=routes.go:1694 msg="Listening on 127.0.0.1:11434 (version 0.5.13)"\n'
BIND_FAIL = "Error: listen tcp 127.0.0.1:11434: bind: address already in use\n"
LOAD = [
    'time=2025-03-05T07:00:01.000Z level=INFO source=server.go:1350 msg="waiting for llama runner to start responding"\n',
    'time=2025-03-05T07:00:03.000Z level=INFO source=server.go:1388 msg="llama runner started in 2.10 seconds"\n',
]


def report(tmp_path: Path, data: bytes) -> dict:
    log = tmp_path / "ollama.log"
    log.write_bytes(data)
    return analyze_path(log)


def test_a_second_instance_that_cannot_bind_is_that_instances_failure(tmp_path: Path) -> None:
    # The first `ollama serve` is up; a second one, appending to the same log, cannot bind the port.
    s = report(tmp_path, (SERVER_CONFIG + LISTENING + BIND_FAIL).encode())
    assert s["verdict"] == "failed", s
    assert s["failure"]["text"] == BIND_FAIL.strip() and s["failure"]["category"] == "port_in_use"
    assert s["launches"] == 2 and s["launch_start_line"] == 3


def test_a_nul_run_splits_two_writers_of_one_log(tmp_path: Path) -> None:
    # The file was truncated while the second writer held its offset: NULs, then its lines.
    first = (SERVER_CONFIG + LISTENING).encode()
    second = (
        b"\x00" * 4096 + b"Couldn't find '/root/.ollama/id_ed25519'. Generating new private key.\n" + BIND_FAIL.encode()
    )
    s = report(tmp_path, first + second)
    assert s["verdict"] == "failed", s
    assert s["failure"]["text"] == BIND_FAIL.strip()
    # After readiness the lines after a break are the ready server's own (a log truncated under it goes on) until
    # one says another instance: its bind error begins that instance's launch
    assert s["launch_start_line"] == 4


def test_a_nul_run_after_a_failed_start_begins_a_fresh_launch(tmp_path: Path) -> None:
    first = (SERVER_CONFIG + BIND_FAIL).encode()
    s = report(tmp_path, first + b"\x00" * 512 + (SERVER_CONFIG + LISTENING).encode())
    assert s["verdict"] == "ready" and "Listening on" in s["ready"]["text"], s


GIN = [  # an older daemon's request lines, written at its own offset after the file was truncated
    '[GIN] 2025/10/09 - 21:04:14 | 200 |   65.707448ms |       127.0.0.1 | POST     "/api/show"\n',
    '[GIN] 2025/10/09 - 21:16:45 | 500 |        38m13s |       127.0.0.1 | POST     "/api/generate"\n',
]


def test_lines_after_a_nul_run_that_say_nothing_of_a_launch_leave_the_launch_before_judged(tmp_path: Path) -> None:
    s = report(tmp_path, BIND_FAIL.encode() + b"\x00" * 4096 + "".join(GIN).encode())
    assert s["verdict"] == "failed" and s["failure"]["text"] == BIND_FAIL.strip(), s
    assert s["launches"] == 1 and s["launch_start_line"] == 1


VLLM_READY = CORPUS / "vllm" / "v0.10.0-v1-no-prefix-qwen3-4b-modelscope-path-ready-serving.log"


def test_a_ready_servers_log_truncated_under_it_goes_on_as_its_serving(tmp_path: Path) -> None:
    # copytruncate under a server that writes without O_APPEND: its next lines land at its old offset, after NULs
    text = VLLM_READY.read_bytes()
    head, rest = text.split(b"Application startup complete.", 1)
    head += b"Application startup complete." + rest.split(b"\n", 1)[0] + b"\n"
    stats = [x for x in text.split(b"\n") if b"Avg prompt throughput" in x]
    assert stats
    from bootwatch.pipeline import Analyzer
    from bootwatch.tracker import LaunchEvent

    a = Analyzer(clock="arrival")
    a.feed(head, now=1.0)
    assert a.tracker.says(1.0).ready
    events = a.feed(b"\x00" * 4096 + b"\n".join(stats) + b"\n", now=2.0)
    assert not any(isinstance(e, LaunchEvent) for e in events)
    assert a.tracker.says(2.0).ready and a.tracker.launches == 1
    s = report(tmp_path, head + b"\x00" * 4096 + b"\n".join(stats) + b"\n")
    assert s["verdict"] == "ready" and s["launches"] == 1, s
    assert s["serving"] is not None and s["serving"]["samples"]["log"] >= len(stats), s["serving"]


def test_live_the_launch_before_a_break_is_what_the_log_says_while_the_lines_after_say_nothing() -> None:
    from bootwatch.pipeline import Analyzer

    a = Analyzer(clock="arrival")
    a.feed(BIND_FAIL.encode() + b"\x00" * 4096 + "".join(GIN).encode(), now=10.0)
    says = a.tracker.says(10.5)
    assert says.dying and not says.ready


def test_live_the_death_before_the_nul_run_is_judged_and_no_launch_is_said_after_it() -> None:
    from bootwatch.pipeline import Analyzer
    from bootwatch.tracker import LaunchEvent

    a = Analyzer(clock="arrival")
    events = a.feed(BIND_FAIL.encode() + b"\x00" * 4096 + "".join(GIN).encode(), now=10.0)
    assert not any(isinstance(e, LaunchEvent) for e in events)
    a.tracker.settle(20.0)
    launch = a.tracker.launch
    assert launch is not None and launch.failure is not None and launch.failure.text == BIND_FAIL.strip()


def test_ollama_summary_says_the_apis_readiness_and_the_model_loads(tmp_path: Path) -> None:
    s = report(tmp_path, (SERVER_CONFIG + LISTENING + "".join(LOAD)).encode())
    assert s["verdict"] == "ready" and "llama runner started in 2.10 seconds" in s["ready"]["text"], s
    assert s["server_ready"]["line_no"] == 2 and "Listening on" in s["server_ready"]["text"]
    out = subprocess.run(
        [sys.executable, "-m", "bootwatch", "report", str(tmp_path / "ollama.log")],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "API ready at line 2" in out and "model loaded at line 4" in out, out


# ---- a server started again in the same log (old 1.5): the new launch's verdict is its own --------------------
VLLM_READY = CORPUS / "vllm/v0.6.4-tp2-llama8b-ready.log"
# vLLM 0.11 refusing its arguments: no banner, only the platform line every vLLM process prints, then the traceback
VLLM_REFUSED = CORPUS / "vllm/v0.11-macos-cpu-chat-template-path-validation-error.log"
BANNER = "INFO 11-18 17:10:46 api_server.py:585] vLLM API server version 0.6.4.post1\n"


def test_a_failing_launch_appended_after_a_ready_one_is_failed(tmp_path: Path) -> None:
    old = VLLM_READY.read_bytes()
    s = report(tmp_path, old + VLLM_REFUSED.read_bytes())
    assert s["verdict"] == "failed", s
    assert s["failure"]["text"].startswith("ValueError: The supplied chat template string (tool_use) appears path-like")
    assert s["launches"] == 2 and s["launch_start_line"] == old.count(b"\n") + 1


def test_uvicorn_started_again_after_it_finished_is_a_new_launch(tmp_path: Path) -> None:
    log = (
        BANNER + "INFO:     Started server process [100]\nINFO:     Waiting for application startup.\n"
        "INFO:     Application startup complete.\nINFO:     Finished server process [100]\n"
        "INFO:     Started server process [200]\nRuntimeError: model file missing\n"
    )
    s = report(tmp_path, log.encode())
    assert s["verdict"] == "failed" and s["failure"]["text"] == "RuntimeError: model file missing", s
    assert s["launches"] == 2 and s["launch_start_line"] == 6


def test_another_worker_starting_while_the_server_is_up_is_the_same_launch(tmp_path: Path) -> None:
    # uvicorn --workers: each worker says it started; none finished, so none is a restart.
    log = (
        BANNER + "INFO:     Started server process [100]\nINFO:     Application startup complete.\n"
        "INFO:     Started server process [101]\nINFO:     Waiting for application startup.\n"
        "INFO:     Application startup complete.\n"
    )
    s = report(tmp_path, log.encode())
    assert s["verdict"] == "ready" and s["launches"] == 1, s


def test_watch_judges_a_failing_launch_appended_after_a_ready_one(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(VLLM_READY.read_bytes())
    watcher = subprocess.Popen(
        [sys.executable, "-m", "bootwatch", "watch", "--json", "--stall", "6s", "--timeout", "60", str(log)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert watcher.stdout is not None
    first = watcher.stdout.readline()  # it says the last launch already ended: the new one is appended only then
    assert "already ended" in first, first
    with log.open("ab") as f:
        f.write(VLLM_REFUSED.read_bytes())
    out, _ = watcher.communicate(timeout=60)
    s = json.loads(out.splitlines()[-1])
    assert (watcher.returncode, s["verdict"]) == (1, "failed"), s
    assert s["failure"]["text"].startswith("ValueError: The supplied chat template string (tool_use)")
