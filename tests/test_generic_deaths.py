"""Deaths any server can die of, whatever its engine: the specific line that says why beats the generic one
that only says it died. Lines from tests/fixtures/real_lines/generic.log (real, with sources)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bootwatch.pipeline import analyze_path

START = "INFO 08-12 10:11:12 [api_server.py:12] vLLM API server version 0.6.3\nLoading model weights\n"
SGLANG_START = (
    "[2025-05-01 05:11:17] server_args=ServerArgs(model_path='m')\n[2025-05-01 05:11:17] Load weight begin.\n"
)


def report(tmp_path: Path, body: str, head: str = START) -> dict:
    log = tmp_path / "server.log"
    log.write_text(head + body)
    return analyze_path(log)


@pytest.mark.parametrize(
    ("body", "cause"),
    [
        (
            "terminate called after throwing an instance of 'std::runtime_error'\n"
            "  what():  fatal error; see Log::Fatal output\nAborted (core dumped)\n",
            "what():  fatal error; see Log::Fatal output",
        ),
        (
            "terminate called after throwing an instance of 'std::invalid_argument'\n"
            "  what(): Tensor shapes must match for addition\nFatal Python error: Aborted\n\nThread 0x00007f (most recent "
            'call first):\n  File "/x.py", line 3 in f\n',
            "what(): Tensor shapes must match for addition",
        ),
        ("Aborted (core dumped)\n", "Aborted (core dumped)"),
        (
            "/zhome/ee/d/137643/.lsbatch/1586903179.6180387.shell: line 12: 24905 Killed                  "
            "python main.py $LSB_PROJECT_NAME\n",
            "/zhome/ee/d/137643/.lsbatch/1586903179.6180387.shell: line 12: 24905 Killed                  "
            "python main.py $LSB_PROJECT_NAME",
        ),
        ("zsh: killed     nebula upgrade\n", "zsh: killed     nebula upgrade"),
        (
            "[rank0]:[E709 17:05:39.083402482 ProcessGroupNCCL.cpp:1899] [PG ID 0 PG GUID 0(default_pg) Rank 0] Process "
            "group watchdog thread terminated with exception: [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=20585, OpType=ALLREDUCE)\n"
            "[rank3]:[E606 09:10:08.363090292 ProcessGroupNCCL.cpp:832] [Rank 3] To avoid data inconsistency, we are "
            "taking the entire process down.\n",
            "Watchdog caught collective operation timeout",
        ),
        (
            "[TM][FATAL][0914.14:00:37.807188][cast.cu:264] CUDA error: no kernel image is available for execution on "
            "the device\n",
            "CUDA error: no kernel image is available",
        ),
        ("[Device not found] Device acquire failed.\n", "Device acquire failed."),
    ],
)
def test_quiet_death_is_failed_with_the_specific_line(tmp_path: Path, body: str, cause: str) -> None:
    s = report(tmp_path, body)
    assert s["verdict"] == "failed", s
    assert cause in s["failure"]["text"], s["failure"]


def test_generic_death_without_a_reason_still_fails_an_sglang_launch(tmp_path: Path) -> None:
    s = report(tmp_path, "Segmentation fault (core dumped)\n", head=SGLANG_START)
    assert s["engine"] == "sglang"
    assert s["verdict"] == "failed" and s["failure"]["text"] == "Segmentation fault (core dumped)"


@pytest.mark.parametrize(
    ("printed", "want_no", "want_text"),
    [
        (b"error: invalid argument: --no-such-flag\n", 1, "error: invalid argument: --no-such-flag"),
        (b"bash: line 1: vllm: command not found\n", 1, "bash: line 1: vllm: command not found"),
        (b"starting\nlast words: cannot open /models/x\n\n", 2, "last words: cannot open /models/x"),
        (b"starting\nloading\n", 2, "process exited with code 3"),
        (b"", None, "process exited with code 3"),
    ],
)
def test_a_death_no_rule_explains_names_the_last_words_or_the_exit(
    printed: bytes, want_no: int | None, want_text: str
) -> None:
    from bootwatch.pipeline import Analyzer

    a = Analyzer(clock="arrival")
    a.feed(printed, 1.0)
    a.tracker.exited(3, None)
    s = a.summary().to_json()
    assert s["verdict"] == "failed"
    assert (s["failure"]["line_no"], s["failure"]["text"]) == (want_no, want_text)
    assert s["exit"] == {"code": 3, "signal": None}
