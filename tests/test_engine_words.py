"""Engines read by their own words: each engine file's readiness on the real lines it was written from
(tests/fixtures/real_lines), and the generic readiness of a server no file knows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bootwatch.pipeline import analyze_path

from .conftest import CORPUS, FIXTURES

UNKNOWN = "engine unknown, ready by its own listening line"


def real(name: str) -> str:
    lines = (FIXTURES / "real_lines" / f"{name}.log").read_text("utf-8").splitlines()
    return "\n".join(x for x in lines if not x.startswith("# ")) + "\n"


def group(name: str, source: str) -> str:
    """The lines of one `# source:` group of a real-lines fixture (the group whose source line holds `source`)."""
    out: list[str] = []
    inside = False
    for x in (FIXTURES / "real_lines" / f"{name}.log").read_text("utf-8").splitlines():
        if x.startswith("# "):
            inside = x.startswith("# source:") and source in x
        elif inside:
            out.append(x)
    assert out, f"no group {source!r} in {name}"
    return "\n".join(out) + "\n"


def report(tmp_path: Path, text: str) -> dict:
    log = tmp_path / "server.log"
    log.write_text(text)
    return analyze_path(log)


@pytest.mark.parametrize(
    ("name", "ready_text"),
    [
        ("mistralrs", "Serving on http://0.0.0.0:1234"),
        ("mlx_lm", "Starting httpd at "),
        ("lmstudio", "Success! HTTP server listening on port 1234"),
        ("triton", "Started HTTPService at 0.0.0.0:8000"),
        ("dynamo", 'Starting HTTP(S) service protocol="HTTP" address="0.0.0.0:8000"'),
        ("sglang_router", "Starting server on 0.0.0.0:8000"),
        ("koboldcpp", "Please connect to custom endpoint at http://"),
        ("tabbyapi", "Uvicorn running on http://10.1.1.10:8080"),
        ("xinference", "Uvicorn running on http://127.0.0.1:9997"),
    ],
)
def test_each_engine_is_ready_by_its_own_words(tmp_path: Path, name: str, ready_text: str) -> None:
    s = report(tmp_path, real(name))
    assert s["engine"] == name and s["verdict"] == "ready", s
    assert ready_text in s["ready"]["text"]
    assert "how" not in s["ready"]  # its own file's readiness, not the generic one


def test_a_dynamo_worker_is_ready_when_it_registers_its_model(tmp_path: Path) -> None:
    # The engine the worker embeds prints its own lines (here vLLM's), but never its HTTP readiness.
    text = (
        "INFO 05-12 02:45:15 [api_server.py:1043] vLLM API server version 0.8.5.post1\n"
        "INFO 05-12 02:45:20 [loader.py:458] Loading weights took 3.21 seconds\n"
        + "\n".join(real("dynamo").splitlines()[-2:])
        + "\n"
    )
    s = report(tmp_path, text)
    assert s["engine"] == "dynamo" and s["verdict"] == "ready", s
    assert "Registered base model" in s["ready"]["text"]


def test_a_server_no_file_knows_is_ready_by_its_own_listening_line(tmp_path: Path) -> None:
    text = "loading weights from /models/m\nweights loaded in 3.2 s\nServing on http://0.0.0.0:1234\n"
    s = report(tmp_path, text)
    assert s["engine"] == "unknown" and s["verdict"] == "ready", s
    assert s["ready"]["line_no"] == 3 and s["ready"]["how"] == UNKNOWN
    log = tmp_path / "server.log"
    out = subprocess.run(
        [sys.executable, "-m", "bootwatch", "report", str(log)], capture_output=True, text=True, timeout=60
    )
    assert UNKNOWN in out.stdout, out.stdout


def test_torch_distributed_socket_is_not_a_server_listening(tmp_path: Path) -> None:
    text = "[W socket.cpp:464] [c10d] The server socket has started to listen on [::]:29500.\nloading shards\n"
    assert report(tmp_path, text)["verdict"] == "incomplete"


def test_a_client_failure_after_a_generic_readiness_is_not_a_failed_start(tmp_path: Path) -> None:
    # A uvicorn app (a load balancer in front of SGLang servers) is ready; a benchmark run against it then
    # fails its assertion, printed in SGLang's line format: a later client failure, not a failed startup.
    text = (
        "INFO:     Started server process [4242]\n"
        "INFO:     Waiting for application startup.\n"
        "INFO:     Application startup complete.\n"
        "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)\n"
        "[2025-10-01 10:00:05] Benchmark starts against http://127.0.0.1:8000\n"
        "[2025-10-01 10:00:09] accuracy=0.12\n"
        "Traceback (most recent call last):\n"
        '  File "/work/bench/test_accuracy.py", line 40, in <module>\n'
        "    assert accuracy > 0.6\n"
        "AssertionError\n"
    )
    s = report(tmp_path, text)
    assert s["verdict"] == "ready", s
    assert s["ready"]["line_no"] == 4


def test_mistralrs_used_as_a_crate_is_ready_when_its_dummy_run_completes(tmp_path: Path) -> None:
    # No server: a Rust program builds MistralRs itself, whose dummy run is the last step before requests.
    s = report(tmp_path, group("mistralrs", "a program embedding mistral.rs"))
    assert s["engine"] == "mistralrs" and s["verdict"] == "ready", s
    assert s["ready"]["text"].startswith("Dummy run completed in 133.91")


def test_a_mistralrs_server_is_not_ready_at_its_dummy_run(tmp_path: Path) -> None:
    # The server logs "Model loaded." before the same dummy run: it still has to bind its API port (the MCP
    # server's line after it is not that). A server's first lines (one user's), then the end of a load (another's).
    s = report(tmp_path, group("mistralrs", "issue #1699") + group("mistralrs", "issue #1555"))
    assert s["engine"] == "mistralrs" and s["verdict"] == "incomplete", s


def test_mistralrs_is_known_by_its_device_map_before_the_server_says_model_loaded(tmp_path: Path) -> None:
    # Since 0.7 the server's own first lines are debug-level: the device mapper's line (server and crate alike)
    # is what names the engine before "Model loaded." (which then marks it a server, not ready at its dummy run).
    text = group("mistralrs", "a program embedding mistral.rs").splitlines()
    s = report(tmp_path, "\n".join(text[:2]) + "\n" + group("mistralrs", "issue #1555"))
    assert s["engine"] == "mistralrs" and s["verdict"] == "incomplete", s


LOCALAI_COMPOSE = CORPUS / "localai" / "docker-compose-2023-04-fiber-v2.44-gpt4all-j-exits-on-first-request-ready.log"


def test_only_the_line_just_before_is_judged_again(tmp_path: Path) -> None:
    # LocalAI's top border is judged again as its readiness when the next line names LocalAI
    # (test_rules_other_engines); a line between the border and the line that names the engine: the border is no longer the banner's start.
    # (without compose's service name, which names LocalAI before its banner does)
    lines = [re.sub(r"^localai-api-1\s+\| ?", "", x) for x in LOCALAI_COMPOSE.read_text("utf-8").split("\n")]
    s = report(tmp_path, "\n".join([*lines[:3], "loading", *lines[3:]]))
    assert s["verdict"] == "ready" and "Fiber v2.44.0" in s["ready"]["text"], s


def test_a_wrappers_argument_error_before_tabbyapi_starts_is_not_its_failure(tmp_path: Path) -> None:
    # uv refuses an argument of the start script's, which then starts the server anyway ("Starting TabbyAPI...").
    text = "error: unexpected argument '-V' found\nUsage: uv pip [OPTIONS] <COMMAND>\n\n" + real("tabbyapi")
    s = report(tmp_path, text)
    assert s["engine"] == "tabbyapi" and s["verdict"] == "ready" and s["failure"] is None, s
    assert s["launches"] == 2
