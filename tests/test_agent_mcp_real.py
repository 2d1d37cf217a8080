"""`bootwatch mcp` with the real llama-server (scripts/real-servers prepares it): the MCP SDK's client starts
it detached, waits (bounded) until it is ready with progress notifications, reads its log and stops it."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

pytest.importorskip("mcp")

from .test_agent_mcp import bootwatch_mcp, payload  # noqa: E402
from .test_real_servers import free_port, llama_cmd  # noqa: E402

pytestmark = pytest.mark.real_server


async def test_mcp_starts_waits_for_reads_and_stops_a_real_llama_server(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "llama.log"
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    pid, left = None, False
    try:
        async with bootwatch_mcp(tmp_path / "home") as s:
            text, started = payload(
                await s.call_tool(
                    "start_server", {"command": llama_cmd(port, ctx="4000000"), "log": str(log), "wait_s": 0}
                )
            )
            st = started["standing"]
            pid = st["server"]["pid"]
            assert started["exit_code"] in (0, 3) and st["server"]["alive"] and st["log"] == str(log)
            assert f"server pid {pid}" in text or started["exit_code"] == 0

            t0 = time.monotonic()
            text, waited = payload(
                await s.call_tool("wait_for_startup", {"source": str(log), "wait_s": 120}, progress_callback=progress)
            )
            assert waited["exit_code"] == 0 and waited["standing"]["state"] == "ready", waited
            assert waited["engine"] == "llamacpp" and text.startswith("ready after")
            assert time.monotonic() - t0 < 120
            assert len(seen) >= 2 and seen[-1][0] == seen[-1][1], seen  # phases notified, up to ready

            text, state = payload(await s.call_tool("server_state", {"pid": pid}))
            assert state["server"]["alive"] is True and state["standing"]["state"] == "ready"

            text, report = payload(await s.call_tool("read_log", {"path": str(log)}))
            assert report["verdict"] == "ready" and report["engine"] == "llamacpp"
            assert "startup ready" in text

            text, stopped = payload(await s.call_tool("stop_server", {"pid": pid}))
            assert stopped["stopped"] is True and stopped["how"] in ("SIGTERM", "SIGKILL")
            assert not _running(pid)

            again = await s.call_tool("stop_server", {"pid": pid})  # no longer ours to stop
            assert again.is_error
    finally:
        if pid is not None and _running(pid):
            left = True
            psutil.Process(pid).kill()
    assert not left, f"llama-server pid {pid} was left running"


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
