"""`bootwatch mcp`: a Model Context Protocol server on stdio (the official `mcp` SDK, the optional extra
`bootwatch[mcp]`). Each tool answers with two lines of text and the JSON object (also as structured
content); bad input is a tool error, never the end of the server. The work is agent/tools.py's."""

from __future__ import annotations

import json
from typing import Any

try:  # the tools' annotations are read by the SDK: its types must be this module's globals
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, TextContent

    HAVE_MCP = True
except ImportError:  # pragma: no cover - the extra is not installed
    HAVE_MCP = False

from bootwatch import __version__
from bootwatch.agent.tools import Answer, ToolFailure, Tools
from bootwatch.errors import UsageError

INSTRUCTIONS = (
    "bootwatch watches LLM inference servers (vLLM, SGLang, TGI, llama.cpp, ...) start up. start_server "
    "launches one detached; wait_for_startup returns within wait_s with where the startup stands (exit_code "
    "3 = still starting: call it again, nothing was stopped); read_log explains a finished or failed log; "
    "stop_server stops only servers started here. Sources: a log path, ssh://[user@]host/path, "
    "docker://CONTAINER, k8s://[namespace/]pod[/container]."
)


def build(tools: Tools | None = None) -> Any:
    if not HAVE_MCP:
        raise UsageError("bootwatch mcp needs the MCP SDK: pip install 'bootwatch[mcp]'")

    t = tools or Tools()
    server = MCPServer("bootwatch", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    async def answer(work: Any) -> CallToolResult:
        try:
            a: Answer = await work
        except ToolFailure as e:
            raise ToolError(str(e)) from None
        except ValueError as e:  # JSON that did not parse, a bad number
            raise ToolError(f"bootwatch: {e}") from None
        text = a.json_text()
        return CallToolResult(
            content=[TextContent(type="text", text=a.text), TextContent(type="text", text=text)],
            structured_content=json.loads(text),
        )

    @server.tool(
        description="Start an inference server detached (as `bootwatch run --detach`): its output "
        "goes to a log file; returns after wait_s at most (0: at once) with where the startup stands "
        "and the server's pid and log. The server runs on until stop_server."
    )
    async def start_server(
        command: list[str],
        log: str | None = None,
        url: str | None = None,
        engine: str | None = None,
        wait_s: float = 0.0,
    ) -> CallToolResult:
        return await answer(t.start_server(command, log, url, engine, wait_s))

    @server.tool(
        description="Wait at most wait_s seconds for a startup (a log path, ssh://, docker://, k8s://): "
        "returns at once when ready (exit_code 0) or failed (1, with the root cause); else exit_code 3 "
        "'still starting' with the phase, progress, ETA, elapsed time, the last line and whether it "
        "moved. Sends progress notifications as phases pass. Never stops a server."
    )
    async def wait_for_startup(
        source: str, ctx: Context, wait_s: float = 60.0, url: str | None = None, engine: str | None = None
    ) -> CallToolResult:
        async def progress(value: float, total: float, message: str) -> None:
            await ctx.report_progress(value, total, message)

        return await answer(t.wait_for_startup(source, wait_s, url, engine, progress))

    @server.tool(
        description="Analyse a server log (as `bootwatch report`): verdict, root cause of a failure, "
        "phases and warnings."
    )
    async def read_log(path: str, engine: str | None = None) -> CallToolResult:
        return await answer(t.read_log(path, engine))

    @server.tool(
        description="Where a startup stands now (no waiting): give the source it logs to, or the pid "
        "of a server start_server started (then also whether it still runs)."
    )
    async def server_state(source: str | None = None, pid: int | None = None) -> CallToolResult:
        return await answer(t.server_state(source, pid))

    @server.tool(
        description="Stop a server that start_server started in this session (SIGTERM to its process "
        "group, SIGKILL after 20 s). Refuses any other pid."
    )
    async def stop_server(pid: int) -> CallToolResult:
        return await answer(t.stop_server(pid))

    @server.tool(
        description="Recent startups seen on this machine (the history behind ETAs): model, engine, "
        "outcome, time to ready, root cause."
    )
    async def list_startups(limit: int = 10) -> CallToolResult:
        return await answer(t.list_startups(limit))

    return server


def main() -> int:
    server = build()
    server.run("stdio")
    return 0


__all__ = ["build", "main"]
