"""--then CMD: once ready, run CMD through the shell in a process group of its own, and say how it went."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from bootwatch.guard import Guard
from bootwatch.sources.interrupts import interrupts
from bootwatch.sources.process import ServerProcess, describe_exit, die_with_parent, stop_process_group
from bootwatch.text import redact


@dataclass
class ThenResult:
    """How the --then command went."""

    command: str
    exit_code: int  # 128 + N when a signal ended it, as a shell says
    duration_s: float
    interrupted: bool = False  # a stop signal came while it ran: it was stopped, and the server too
    server_exit: int | None = None  # the server's exit status, when it ended while the command ran

    def to_json(self) -> dict[str, Any]:
        return {"command": redact(self.command), "exit_code": self.exit_code, "duration_s": round(self.duration_s, 3)}

    def code(self) -> int:
        """bootwatch's exit code: the command's, or 1 if the server died meanwhile."""
        if self.interrupted:
            return interrupts().exit_code
        return 1 if self.server_exit is not None else self.exit_code


async def run_then(
    cmd: str, server: ServerProcess | None, guard: Guard | None = None, to_stderr: bool = False
) -> ThenResult:
    """Run CMD through the shell once ready, in a process group of its own: a stop signal stops that whole
    group (the same bounded stop as the server's), and if bootwatch dies, so does CMD (PR_SET_PDEATHSIG on
    the shell, the guard for its group). With --json its output goes to stderr: stdout stays JSON lines."""
    stop = interrupts()
    # A process group of its own is a background group on the terminal: reading the terminal would stop
    # it (SIGTTIN) forever. It reads nothing there.
    stdin = subprocess.DEVNULL if sys.stdin is None or sys.stdin.isatty() else None
    start = time.monotonic()
    proc = await asyncio.create_subprocess_shell(
        cmd, stdin=stdin, stdout=2 if to_stderr else None, process_group=0, preexec_fn=die_with_parent()
    )
    if guard is not None:
        guard.watch(proc.pid)
    result = ThenResult(cmd, 0, 0.0)
    ended = asyncio.ensure_future(proc.wait())
    fired = asyncio.ensure_future(stop.fired.wait())
    try:
        while not ended.done():
            await asyncio.wait({ended, fired}, timeout=0.25, return_when=asyncio.FIRST_COMPLETED)
            if fired.done() and not ended.done():
                result.interrupted = True
                await stop_process_group(proc, stop)
                break
            if server is not None and result.server_exit is None:
                result.server_exit = server.ended()
    finally:
        fired.cancel()
        if not ended.done():  # an exception: CMD must not outlive us
            await stop_process_group(proc, stop)
        await proc.wait()
        if guard is not None:
            guard.forget(proc.pid)
    rc = proc.returncode if proc.returncode is not None else 1
    result.exit_code = 128 - rc if rc < 0 else rc
    result.duration_s = time.monotonic() - start
    return result


def then_note(then: ThenResult) -> str | None:
    """What text output says of a --then that did not go well (JSON has the `then` key)."""
    if then.interrupted:
        return f"--then command stopped ({signal.Signals(interrupts().exit_code - 128).name})"
    if then.server_exit is not None:
        code, sig = describe_exit(then.server_exit)
        how = f"killed by {signal.Signals(sig).name}" if sig and code is None else f"exit code {code}"
        return f"the server exited ({how}) while the --then command ran; --then command exited {then.exit_code}"
    if then.exit_code != 0:
        return f"--then command exited {then.exit_code}"
    return None
