"""The pytest plugin's failed starts, with stand-in servers (no real engine needed): a start that failed is
made once per fixture scope, and every later test that asks gets the same failure at once, saying so."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest_plugins = ("pytester",)

# Counts its starts, prints vLLM's banner and dies of a real traceback (or, "ready": says it is ready and runs).
SERVER = """
import sys, time
open(sys.argv[1], "a").write("start\\n")
print("INFO 11-18 17:10:46 api_server.py:585] vLLM API server version 0.6.4.post1", flush=True)
if sys.argv[2] == "ready":
    print("INFO:     Application startup complete.", flush=True)
    time.sleep(3600)
raise RuntimeError("the stand-in cannot start")
"""


def _stand_in(tmp_path: Path, mode: str) -> tuple[str, Path]:
    """The stand-in's command (as Python source for the inner test file) and the file that counts its starts."""
    server = tmp_path / "srv.py"
    server.write_text(SERVER)
    starts = tmp_path / "starts"
    return json.dumps([sys.executable, str(server), str(starts), mode]), starts


def _run(pytester: pytest.Pytester, source: str) -> pytest.RunResult:
    pytester.makepyfile(test_inner=source)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", timeout=300)


def test_a_failed_start_is_made_once_and_said_again_at_once(pytester: pytest.Pytester, tmp_path: Path) -> None:
    cmd, starts = _stand_in(tmp_path, "fail")
    result = _run(
        pytester,
        f"""
import pytest

@pytest.mark.parametrize("n", range(4))
def test_asks(bootwatch_server, n):
    bootwatch_server({cmd}, timeout="30s")
""",
    )
    result.assert_outcomes(failed=4)
    assert starts.read_text().count("start") == 1  # one launch for the four tests (was four)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(["FAILED *test_asks?0? - ServerFailed: vLLM failed in start: *"])
    result.stdout.fnmatch_lines(["E * vLLM failed in start: *the stand-in cannot start*"])
    # the three later tests' errors say it is the same failure; counted on the error lines only, since the short
    # summary cuts its lines to the terminal's width except under CI=true, where pytest keeps them whole
    errors = [line for line in out.splitlines() if line.startswith("E ")]
    assert sum("not started again]" in line for line in errors) == 3, out
    assert out.count("bootwatch: why the server did not start") == 1 and out.count("the same server as in") == 3


def test_a_shared_server_that_died_is_said_once_and_not_looked_at_again(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    cmd, starts = _stand_in(tmp_path, "ready")
    result = _run(
        pytester,
        f"""
import os, signal, time

CMD = {cmd}

def test_kills_it(bootwatch_server):
    os.kill(bootwatch_server(CMD, timeout="30s").pid, signal.SIGKILL)
    time.sleep(0.5)

def test_asks_again(bootwatch_server):
    bootwatch_server(CMD, timeout="30s")

def test_asks_once_more(bootwatch_server):
    bootwatch_server(CMD, timeout="30s")
""",
    )
    result.assert_outcomes(passed=1, failed=2)
    assert starts.read_text().count("start") == 1
    out = result.stdout.str()
    errors = [x for x in out.splitlines() if x.startswith("E ") and "died after it was ready (exit status -9)" in x]
    assert len(errors) == 2 and "not started again]" in errors[1] and "not started again" not in errors[0], errors
    assert "the same server as in test_inner.py::test_asks_again" in out
