"""bootwatch against real inference servers, started by the tests: vLLM's CPU build and llama.cpp's
llama-server, with a tiny model the project builds itself (scripts/real-servers prepares all three)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from .conftest import ROOT, SESSION_MARK, assert_none_left

pytestmark = pytest.mark.real_server
BOOTWATCH = [sys.executable, "-m", "bootwatch"]


class _Paths(dict[str, str]):
    """Where scripts/real-servers put the servers and the model. Unprepared, a test that asks for one fails
    with what to run; merely importing this module (for `-m "not real_server"`) never does."""

    def __getitem__(self, key: str) -> str:
        missing = [
            k
            for k in ("BOOTWATCH_VLLM_PY", "BOOTWATCH_LLAMA_SERVER", "BOOTWATCH_TINY_MODEL")
            if not self.get(k) or not Path(self.get(k, "")).exists()
        ]
        if missing:
            pytest.fail(f"real servers are not prepared ({', '.join(missing)}): run scripts/real-servers prepare")
        return super().__getitem__(key)


def _paths() -> _Paths:
    p = subprocess.run(["bash", str(ROOT / "scripts" / "real-servers"), "paths"], capture_output=True, text=True)
    out = _Paths()
    for line in p.stdout.splitlines():
        if line.startswith("export "):
            k, _, v = line[7:].partition("=")
            out[k] = v
    return out


if os.environ.get("BOOTWATCH_SKIP_REAL_SERVERS") == "1":
    pytest.skip("BOOTWATCH_SKIP_REAL_SERVERS=1", allow_module_level=True)
PATHS = _paths()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vllm_cmd(
    port: int, model: str | None = None, args: tuple[str, ...] = (), env: tuple[str, ...] = (), kv_bytes: bool = True
) -> list[str]:
    """vLLM's recommended CPU command line, on the tiny model scripts/real-servers builds."""
    kv = ["--kv-cache-memory-bytes", "1073741824"] if kv_bytes else []
    return [
        "env",
        "HF_HUB_OFFLINE=1",
        f"VLLM_CACHE_ROOT={PATHS['BOOTWATCH_VLLM_CACHE_ROOT']}",
        *env,
        PATHS["BOOTWATCH_VLLM_PY"],
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model or PATHS["BOOTWATCH_TINY_MODEL"],
        "--served-model-name",
        "tiny",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *kv,
        "--enforce-eager",
        *args,
    ]


def llama_cmd(port: int, gguf: str | None = None, ctx: str = "512") -> list[str]:
    return [
        PATHS["BOOTWATCH_LLAMA_SERVER"],
        "-m",
        gguf or PATHS["BOOTWATCH_TINY_GGUF"],
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-c",
        ctx,
    ]


def bw(*args: str, timeout: float = 300) -> tuple[int, list[dict], float]:
    if args[0] in ("run", "watch") and "--timeout" not in args:
        # bootwatch gives up (and stops the server it started) before the test would kill it.
        args = (args[0], "--timeout", "240", *args[1:])
    start = time.time()
    p = subprocess.run([*BOOTWATCH, *args], capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    events = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    return p.returncode, events, time.time() - start


def summary(events: list[dict]) -> dict:
    assert events and events[-1]["event"] == "summary", events[-3:]
    return events[-1]


def _servers() -> list[psutil.Process]:
    """This test process's real servers (their environment carries its mark): another xdist worker's stand-ins
    also take titles such as VLLM::EngineCore, and are not ours to find or kill."""
    cache = str(ROOT / ".cache" / "real-servers")
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info.get("cmdline") or []
        if cmd and (
            cmd[0].startswith(cache) or cmd[0].startswith("VLLM::") or (len(cmd) > 1 and cmd[1].startswith(cache))
        ):
            with contextlib.suppress(psutil.Error):
                if p.environ().get("BOOTWATCH_TEST_SESSION") == SESSION_MARK:
                    out.append(p)
    return out


@pytest.fixture(autouse=True)
def no_server_left():
    yield
    assert_none_left(_servers, "real server processes", grace_s=10)


def test_vllm_ready_with_phases_facts_and_verify(tmp_path: Path) -> None:
    port = free_port()
    code, events, took = bw(
        "run", "--log", str(tmp_path / "vllm.log"), "--json", "--verify", "--then", "true", "--", *vllm_cmd(port)
    )
    s = summary(events)
    assert code == 0 and s["verdict"] == "ready", s.get("failure")
    assert s["engine"] == "vllm" and s["engine_version"] == "0.32.0"
    names = [p["name"] for p in s["phases"]]
    assert names[0] == "start" and "load_weights" in names and "kv_cache" in names and names[-1] == "ready"
    assert all(p["duration_s"] is not None for p in s["phases"][:-1])
    assert s["facts"]["kv_cache_tokens"] == 1048576 and s["facts"]["context_length"] == 2048
    assert s["verify"]["ok"] is True and s["verify"]["latency_s"] < 30
    # vLLM keeps its port closed until it is ready: the guessed health URL was refused while it started.
    health = [e["value"] for e in events if e["event"] == "fact" and e["name"] == "health"]
    assert health[0] == "refused" and "503 (starting)" not in health


def test_llama_server_refused_then_503_then_200(tmp_path: Path) -> None:
    port = free_port()
    code, events, _ = bw(
        "run",
        "--log",
        str(tmp_path / "llama.log"),
        "--json",
        "--url",
        f"http://127.0.0.1:{port}/health",
        "--verify",
        "--then",
        "true",
        "--timeout",
        "120",
        "--",
        *llama_cmd(port, ctx="4000000"),
    )
    s = summary(events)
    assert code == 0 and s["engine"] == "llamacpp", s.get("failure")
    health = [e["value"] for e in events if e["event"] == "fact" and e["name"] == "health"]
    assert "503 (starting)" in health and health[-1] == "200"
    assert health.index("503 (starting)") < health.index("200")
    assert s["verify"]["ok"] is True


@pytest.mark.parametrize("case", ["port_in_use", "bad_config", "no_weights", "kv_too_big", "max_model_len"])
def test_vllm_failures(case: str, tmp_path: Path) -> None:
    port = free_port()
    other = None
    model, args, env, want = None, (), (), ""
    if case == "port_in_use":
        other = subprocess.Popen(
            [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.5)
        want = "OSError: [Errno 98] Address already in use"
    elif case == "bad_config":
        model, want = PATHS["BOOTWATCH_TINY_MODEL_BADCONFIG"], "OSError: It looks like the config file at"
    elif case == "no_weights":
        model, want = PATHS["BOOTWATCH_TINY_MODEL_NOWEIGHTS"], "RuntimeError: Cannot find any model weights"
    elif case == "kv_too_big":
        env, want = ("VLLM_CPU_KVCACHE_SPACE=64",), "on kv cache allocation is less than requested memory"
    elif case == "max_model_len":
        args, want = ("--max-model-len", "100000"), "Value error, User-specified max_model_len (100000) is greater"
    # The explicit KV size would win over the environment variable.
    cmd = vllm_cmd(port, model, args, env, kv_bytes=case != "kv_too_big")
    try:
        code, events, _ = bw("run", "--log", str(tmp_path / "vllm.log"), "--json", "--", *cmd)
    finally:
        if other is not None:
            other.terminate()
            other.wait()
    s = summary(events)
    assert code == 1 and s["verdict"] == "failed", s
    assert want in s["failure"]["text"], s["failure"]
    if case == "port_in_use":
        health = [e["value"] for e in events if e["event"] == "fact" and e["name"] == "health"]
        assert all(h != "200" for h in health)


def test_llama_server_truncated_gguf(tmp_path: Path) -> None:
    port = free_port()
    code, events, _ = bw(
        "run",
        "--log",
        str(tmp_path / "l.log"),
        "--json",
        "--",
        *llama_cmd(port, PATHS["BOOTWATCH_TINY_GGUF_TRUNCATED"]),
    )
    s = summary(events)
    assert code == 1 and s["failure"]["text"].startswith("llama_model_load: error loading model: tensor")
    assert s["failure"]["category"] == "weights"


@pytest.mark.parametrize(
    ("flag", "cause"),
    [
        # removed from llama.cpp (it says what replaced it), then its usage text: no banner at all
        (["--draft-max", "4"], 'error while handling argument "--draft-max": the argument has been removed.'),
        (["--no-such-flag"], "error: invalid argument: --no-such-flag"),  # one line, nothing else
    ],
)
def test_llama_server_rejecting_its_arguments_names_the_argument_error(
    tmp_path: Path, flag: list[str], cause: str
) -> None:
    port = free_port()
    code, events, _ = bw("run", "--log", str(tmp_path / "l.log"), "--json", "--", *llama_cmd(port), *flag)
    s = summary(events)
    assert code == 1 and s["verdict"] == "failed" and s["engine"] == "llamacpp", s
    assert s["failure"]["text"].startswith(cause) and s["failure"]["category"] == "config", s["failure"]
    assert s["exit"] == {"code": 1, "signal": None}
    # The log alone says the same.
    code, events, _ = bw("report", "--json", str(tmp_path / "l.log"))
    r = events[-1]
    assert r["verdict"] == "failed" and r["failure"]["text"].startswith(cause)


def test_vllm_engine_killed_after_ready_is_a_runtime_failure(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [*BOOTWATCH, "run", "--log", str(tmp_path / "v.log"), "--json", "--", *vllm_cmd(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: list[dict] = []
    assert proc.stdout is not None
    for raw in proc.stdout:
        lines.append(json.loads(raw))
        if lines[-1]["event"] == "ready":
            break
    engine = [p for p in psutil.Process(proc.pid).children(recursive=True) if "EngineCore" in " ".join(p.cmdline()[:1])]
    assert engine, "no VLLM::EngineCore process found"
    killed = time.time()
    engine[0].kill()
    for raw in proc.stdout:
        lines.append(json.loads(raw))
        if lines[-1]["event"] == "failed":
            detected = time.time()
            break
    out, _ = proc.communicate(timeout=60)
    lines += [json.loads(x) for x in out.splitlines()]
    failed = [e for e in lines if e["event"] == "failed"]
    assert failed and failed[0]["runtime"] is True and "EngineCore" in failed[0]["text"]
    assert detected - killed < 1.5
    assert proc.returncode == 1 and summary(lines)["verdict"] == "ready"
    assert summary(lines)["runtime_failure"] is not None


def test_watch_a_server_started_separately(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "sep.log"
    with log.open("wb") as f:
        server = subprocess.Popen(
            llama_cmd(port, ctx="4000000"), stdout=f, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        code, events, _ = bw(
            "watch", str(log), "--json", "--url", f"http://127.0.0.1:{port}/health", "--timeout", "120"
        )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    s = summary(events)
    assert code == 0 and s["verdict"] == "ready" and s["engine"] == "llamacpp"


LOAD = """
import httpx, sys
url = sys.argv[1]
for i in range(5):
    r = httpx.post(url + "/v1/completions", json={"model": "tiny", "prompt": "hello world", "max_tokens": 8,
                                               "temperature": 0}, timeout=60)
    r.raise_for_status()
    assert r.json()["choices"][0]["text"]
print("5 completions ok")
"""


def test_then_runs_a_real_load_and_stops_the_server(tmp_path: Path) -> None:
    port = free_port()
    load = tmp_path / "load.py"
    load.write_text(LOAD)
    then = f"{shlex.quote(sys.executable)} {shlex.quote(str(load))} http://127.0.0.1:{port}"
    code, events, _ = bw("run", "--log", str(tmp_path / "v.log"), "--json", "--then", then, "--", *vllm_cmd(port))
    assert code == 0
    assert summary(events)["verdict"] == "ready"
