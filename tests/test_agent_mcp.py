"""`bootwatch mcp`, driven by the MCP SDK's own client over stdio: the tools it lists, a failed log's root
cause, bad input as tool errors (the server lives on), and progress notifications while a wait goes on."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

mcp = pytest.importorskip("mcp")  # the dev extra installs it; bootwatch[mcp] is optional for users

from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from .conftest import ROOT  # noqa: E402

FAILED_LOG = ROOT / "tests/corpus/vllm/v0.10.1-gpt-oss-20b-rtx3090-triton-kernels-import-failed.log"
VLLM_LOG = ROOT / "tests/corpus/vllm/v0.9.2-qwen25-3b-local-path-port8801-ready.log"
TOOLS = {"start_server", "wait_for_startup", "read_log", "server_state", "stop_server", "list_startups"}


@contextlib.asynccontextmanager
async def bootwatch_mcp(home: Path) -> AsyncIterator[ClientSession]:
    env = {**os.environ, "BOOTWATCH_HOME": str(home)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "bootwatch", "mcp"], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def payload(result: Any) -> tuple[str, dict[str, Any]]:
    """The two-line text and the JSON object every tool answers with."""
    assert not result.is_error, result.content[0].text
    text, obj = result.content[0].text, json.loads(result.content[1].text)
    assert len(text.splitlines()) == 2, text
    assert result.structured_content == obj
    return text, obj


def _failed_log() -> Path:
    if FAILED_LOG.exists():
        return FAILED_LOG
    return ROOT / "tests/corpus/llamacpp/b2026-terse-log-couldnt-bind-port-8080-failed.log"


async def test_tools_and_a_failed_log_names_its_root_cause(tmp_path: Path) -> None:
    log = _failed_log()
    label = json.loads(log.with_suffix(".json").read_text())
    async with bootwatch_mcp(tmp_path) as s:
        names = {t.name for t in (await s.list_tools()).tools}
        assert names == TOOLS
        text, obj = payload(await s.call_tool("read_log", {"path": str(log)}))
        assert obj["verdict"] == "failed"
        assert obj["failure"]["text"] in label["root_cause_line"]
        assert "root cause" in text and obj["failure"]["text"][:40] in text


async def test_bad_input_is_a_tool_error_and_the_server_lives_on(tmp_path: Path) -> None:
    async with bootwatch_mcp(tmp_path) as s:
        cases = [
            ("read_log", {"path": str(tmp_path / "missing.log")}, "no such file"),
            ("stop_server", {"pid": os.getpid()}, "not started by this bootwatch mcp session"),
            ("wait_for_startup", {"source": str(tmp_path / "x.log"), "wait_s": -1}, "wait_s"),
            ("wait_for_startup", {"source": "--help"}, "source"),
            ("start_server", {"command": []}, "command"),
            ("server_state", {}, "give source"),
            ("list_startups", {"limit": 0}, "limit"),
            ("wait_for_startup", {"source": "ssh://"}, "ssh"),
        ]
        for tool, args, says in cases:
            result = await s.call_tool(tool, args)
            assert result.is_error, (tool, args)
            assert says in result.content[0].text, (tool, result.content[0].text)
        text, obj = payload(await s.call_tool("list_startups", {"limit": 5}))
        assert obj["startups"] == [] and "0 startup(s)" in text


async def test_wait_sends_progress_notifications_as_phases_pass(tmp_path: Path) -> None:
    lines = [ln + b"\n" for ln in VLLM_LOG.read_bytes().rstrip(b"\n").split(b"\n")]
    log = tmp_path / "server.log"
    log.write_bytes(b"".join(lines[:12]))

    def write_slowly() -> None:
        time.sleep(1.0)
        with log.open("ab") as f:
            for ln in lines[12:]:
                f.write(ln)
                f.flush()
                time.sleep(0.15)

    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    writer = threading.Thread(target=write_slowly)
    writer.start()
    try:
        async with bootwatch_mcp(tmp_path / "home") as s:
            result = await s.call_tool(
                "wait_for_startup", {"source": str(log), "wait_s": 60}, progress_callback=progress
            )
            text, obj = payload(result)
            state_text, state = payload(await s.call_tool("server_state", {"source": str(log)}))
    finally:
        writer.join()
    assert obj["exit_code"] == 0 and obj["standing"]["state"] == "ready", obj
    assert text.startswith("ready after")
    assert len(seen) >= 3, seen
    values = [v for v, _, _ in seen]
    assert values == sorted(values) and len(set(values)) == len(values)  # a progress that only grows
    assert seen[-1][0] == seen[-1][1]  # ready is the whole way
    assert any("load_weights" in (m or "") for _, _, m in seen), seen
    assert state["standing"]["state"] == "ready" and state_text.startswith("ready after")


async def test_start_and_stop_a_server_with_its_secret_masked(tmp_path: Path) -> None:
    secret = "sk-abcdefgh12345678secret"
    head = b"".join(ln + b"\n" for ln in VLLM_LOG.read_bytes().split(b"\n")[:16])
    (tmp_path / "head.log").write_bytes(head)
    script = f"cat {tmp_path / 'head.log'}; exec sleep 60"
    command = ["bash", "-c", script, "server", "--api-key", secret]
    async with bootwatch_mcp(tmp_path / "home") as s:
        result = await s.call_tool("start_server", {"command": command, "wait_s": 1})
        text, obj = payload(result)
        everything = text + result.content[1].text
        assert secret not in everything and "--api-key ***" in everything
        assert obj["exit_code"] == 3 and obj["standing"]["phase"] == "load_weights"
        pid = obj["standing"]["server"]["pid"]
        log = obj["standing"]["log"]
        assert Path(log).parent == tmp_path / "home" / "logs"
        text, state = payload(await s.call_tool("server_state", {"pid": pid}))
        assert state["server"] == {"pid": pid, "alive": True, "started_here": True}
        text, stopped = payload(await s.call_tool("stop_server", {"pid": pid}))
        assert (
            stopped["stopped"] is True and stopped["how"] == "SIGTERM" and text.startswith(f"stopped server pid {pid}")
        )
    deadline = time.time() + 5
    while (
        time.time() < deadline
        and Path(f"/proc/{pid}/status").exists()
        and "zombie" not in Path(f"/proc/{pid}/status").read_text()
    ):
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}/status").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


def test_the_report_text_of_an_exit_names_no_line() -> None:
    from bootwatch.agent.tools import _report_text

    data = {
        "verdict": "failed",
        "engine": "unknown",
        "phases": [],
        "failure": {"line_no": None, "text": "process exited with code 3", "category": "exited"},
    }
    text = _report_text(data, "e.log")
    assert "line None" not in text and "root cause: process exited with code 3" in text
    data["failure"]["line_no"] = 7
    assert "root cause, line 7: " in _report_text(data, "e.log")
