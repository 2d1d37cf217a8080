"""`run` with the server's log: an existing --log file, a partial last line, \\r progress bars."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BOOTWATCH = [sys.executable, "-m", "bootwatch"]
BANNER = "INFO 11-18 17:10:46 api_server.py:585] vLLM API server version 0.6.4.post1"
READY = "INFO:     Application startup complete."


def run(log: Path, *server: str, timeout: str = "30") -> dict:
    out = subprocess.run(
        [*BOOTWATCH, "run", "--log", str(log), "--json", "--timeout", timeout, "--", *server],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.stdout, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def sh(script: str) -> list[str]:
    return ["sh", "-c", script]


def test_run_on_an_existing_log_numbers_lines_as_the_file_does(tmp_path: Path) -> None:
    log = tmp_path / "ln.log"
    log.write_text("a\nb\nc\nd\ne\n")
    s = run(log, *sh(f"echo '{BANNER}'; echo '{READY}'"))
    assert s["verdict"] == "ready"
    lines = log.read_text().splitlines()
    assert lines[s["ready"]["line_no"] - 1] == READY and s["ready"]["line_no"] == 7


def test_the_first_server_line_is_not_glued_to_an_old_unterminated_line(tmp_path: Path) -> None:
    log = tmp_path / "glue.log"
    log.write_bytes(b"old partial line without newline")
    s = run(log, *sh(f"echo '{BANNER}'; echo '{READY}'"))
    assert log.read_text().splitlines() == ["old partial line without newline", BANNER, READY]
    assert s["verdict"] == "ready" and s["engine"] == "vllm" and s["ready"]["line_no"] == 3


def test_an_unterminated_last_line_is_analysed_once_the_server_is_gone(tmp_path: Path) -> None:
    # A crash often leaves its cause without a newline: it is the last line, complete as it will ever be.
    cause = "RuntimeError: CUDA error: an illegal memory access was encountered"
    s = run(tmp_path / "x.log", *sh(f"echo '{BANNER}'; printf '{cause}'; exit 139"))
    assert s["verdict"] == "failed" and s["failure"]["text"] == cause and s["failure"]["line_no"] == 2, s["failure"]


BAR = (
    "import os, sys, time\n"
    "print({banner!r}, flush=True)\n"
    "for i in range(4):\n"
    "    sys.stderr.write(f'\\rLoading safetensors checkpoint shards: {{i * 25}}% Completed | {{i}}/4 [00:0{{i}}<00:04]')\n"
    "    sys.stderr.flush()\n"
    "    while not os.path.exists(os.path.join({d!r}, f'go{{i}}')):\n"
    "        time.sleep(0.01)\n"
    "sys.stderr.write('\\n')\n"
    "print({ready!r}, flush=True)\n"
)


def test_each_redraw_of_a_progress_bar_is_seen_as_it_arrives(tmp_path: Path) -> None:
    # The bar draws its next state only once the test has seen the last one in bootwatch's output: a reader that
    # waits for the bar's newline (or for its next redraw) never shows it, and the test times out.
    script = tmp_path / "tq.py"
    script.write_text(BAR.format(banner=BANNER, ready=READY, d=str(tmp_path)))
    proc = subprocess.Popen(
        [
            *BOOTWATCH,
            "run",
            "--log",
            str(tmp_path / "tq.log"),
            "--json",
            "--timeout",
            "15",
            "--",
            sys.executable,
            str(script),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    try:
        seen = []
        for line in proc.stdout:
            ev = json.loads(line)
            if ev["event"] == "progress":
                assert ev["line_no"] == 2
                seen.append(ev["n"])
                (tmp_path / f"go{ev['n']}").touch()
            if ev["event"] == "summary":
                break
        assert ev["verdict"] == "ready" and ev["ready"]["line_no"] == 3
        assert seen == [0, 1, 2, 3]  # each state once: a redraw is not taken for another
    finally:
        proc.kill()
        proc.wait()
