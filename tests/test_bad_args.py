"""Bad argument lines that gave `internal error` or were silently accepted (red-team-3 N22): each is refused
with what is wrong, exit 2, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from bootwatch import cli

CASES = [
    (["watch", "--url", "http://[::1", "LOG"], "not a URL"),
    (["watch", "--url", "http://127.0.0.1:8000/\x1b[2J", "LOG"], "control characters"),
    (["watch", "--pid", "-1", "LOG"], "--pid -1"),
    (["watch", "--metrics-port", "70000", "LOG"], "--metrics-port 70000"),
    (["run", "--metrics-port", "70000", "--", "true"], "--metrics-port 70000"),
    (["history", "--limit", "99999999999999999999999"], "--limit"),
    (["history", "--compare", "99999999999999999999", "1"], "--compare"),
    (["watch", "--state", "DIR", "LOG"], "is a directory"),
    (["run", "--log", "", "--", "true"], "empty file name"),
    (["report", "LOG", "--html", ""], "empty file name"),
    (["report", ""], "empty file name"),
    (["replay", "--speed", "-1", "LOG"], "--speed"),
    (["replay", "--speed", "nan", "LOG"], "--speed"),
    (["replay", "--speed", "inf", "LOG"], "--speed"),
    (["watch", "--timeout", "0", "LOG"], "--timeout 0"),
    (["watch", "--stall", "0", "LOG"], "--stall 0"),
]


@pytest.mark.parametrize(("argv", "says"), CASES, ids=[" ".join(a)[:40] for a, _ in CASES])
def test_a_bad_argument_is_a_clear_exit_2(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "s.log"
    log.write_text("INFO 11-18 17:10:46 api_server.py:585] vLLM API server version 0.6.4.post1\n")
    argv = [str(log) if a == "LOG" else str(tmp_path) if a == "DIR" else a for a in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("bootwatch: ") and "internal error" not in err and says in err, err
