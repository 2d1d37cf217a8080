"""The pytest plugin, run by pytester in a pytest of its own (through the installed pytest11 entry point)
against the real llama-server and vLLM CPU: servers shared by tests, a broken start explained in the
failure output, a server that dies during a test named in that test's report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_real_servers import PATHS, _servers, free_port, llama_cmd, vllm_cmd

pytest_plugins = ("pytester",)
pytestmark = pytest.mark.real_server


@pytest.fixture(autouse=True)
def no_server_left():
    from .conftest import assert_none_left

    yield
    assert_none_left(_servers, "real server processes", grace_s=10)


def _run(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_inner=source)
    # Its own process: the plugin must come from the entry point, and a server it starts must not outlive it.
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", *args, timeout=600)


def test_llama_server_started_once_and_shared(pytester: pytest.Pytester, tmp_path: Path) -> None:
    cmd = llama_cmd(free_port())
    pids = tmp_path / "pids"
    result = _run(
        pytester,
        f"""
import httpx, pytest

CMD = {json.dumps(cmd)}

@pytest.fixture(scope="session")
def llama(bootwatch_server):
    return bootwatch_server(CMD, verify=True, timeout="2m")

@pytest.mark.parametrize("n", [1, 2])
def test_completion(llama, n):
    open({str(pids)!r}, "a").write(f"{{llama.pid}}\\n")
    assert llama.summary["verdict"] == "ready" and llama.summary["verify"]["ok"]
    r = httpx.post(llama.base_url + "/completion", json={{"prompt": "hi", "n_predict": 1}}, timeout=30)
    assert r.status_code == 200
""",
    )
    result.assert_outcomes(passed=2)
    assert len(set(pids.read_text().split())) == 1  # one server for both tests


def test_broken_start_shows_the_root_cause_in_the_failure(pytester: pytest.Pytester) -> None:
    cmd = llama_cmd(free_port(), gguf=PATHS["BOOTWATCH_TINY_GGUF_TRUNCATED"])
    result = _run(
        pytester,
        f"""
import pytest

@pytest.fixture(scope="module")
def llama(bootwatch_module_server):
    return bootwatch_module_server({json.dumps(cmd)}, timeout="2m")

def test_uses_it(llama):
    pass

def test_uses_it_too(llama):
    pass
""",
    )
    result.assert_outcomes(errors=2)
    out = result.stdout.str()
    # One line leads with the engine and the cause, in the error and in the short summary; the phase table
    # and the log's path once, for the first test; the second test that shares the server points back to it.
    result.stdout.fnmatch_lines(
        ["*ServerFailed: llama.cpp failed in load_weights: *data is not within the file bounds*"]
    )
    result.stdout.fnmatch_lines(["ERROR *test_uses_it - ServerFailed: llama.cpp failed in load*"])
    assert out.count("bootwatch: why the server did not start") == 1
    assert "<- died here" in out and "log: " in out and "the same server as in" in out
    first = out.split("_ ERROR at setup of test_uses_it _")[1].split("_ ERROR at setup of test_uses_it_too _")[0]
    assert len(first.strip().splitlines()) <= 15, first


def test_a_server_that_dies_during_a_test_is_named_in_its_report(pytester: pytest.Pytester) -> None:
    result = _run(
        pytester,
        f"""
import os, signal, time, httpx

def test_server_dies(bootwatch_server):
    server = bootwatch_server({json.dumps(llama_cmd(free_port()))}, timeout="2m")
    os.kill(server.pid, signal.SIGKILL)
    time.sleep(0.5)
    httpx.get(server.url, timeout=5)
""",
    )
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "bootwatch: a server died" in out and "is no longer running (exit status -9)" in out


@pytest.mark.slow
def test_vllm_cpu_fixture_and_a_broken_vllm(pytester: pytest.Pytester) -> None:
    good = vllm_cmd(free_port())
    bad = vllm_cmd(free_port(), PATHS["BOOTWATCH_TINY_MODEL_NOWEIGHTS"])
    result = _run(
        pytester,
        f"""
import httpx, pytest

@pytest.fixture(scope="module")
def vllm(bootwatch_module_server):
    return bootwatch_module_server({json.dumps(good)}, verify=True, timeout="4m")

@pytest.fixture(scope="module")
def broken(bootwatch_module_server):
    return bootwatch_module_server({json.dumps(bad)}, timeout="4m")

def test_models(vllm):
    assert vllm.summary["engine"] == "vllm" and vllm.summary["verify"]["ok"]
    assert "load_weights" in [p["name"] for p in vllm.summary["phases"]]
    assert httpx.get(vllm.base_url + "/v1/models", timeout=30).json()["data"][0]["id"] == "tiny"

def test_broken(broken):
    pass
""",
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*ServerFailed: vLLM failed in load_weights*Cannot find any model weights*"])
    assert "<- died here" in result.stdout.str()


def test_a_shared_server_that_died_is_not_handed_out_again(pytester: pytest.Pytester) -> None:
    cmd = json.dumps(llama_cmd(free_port()))
    result = _run(
        pytester,
        f"""
import os, signal, time

CMD = {cmd}

def test_kills_it(bootwatch_server):
    server = bootwatch_server(CMD, timeout="2m")
    os.kill(server.pid, signal.SIGKILL)
    time.sleep(0.5)

def test_asks_again(bootwatch_server):
    bootwatch_server(CMD, timeout="2m")
""",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*ServerFailed: *died after it was ready (exit status -9)*"])
