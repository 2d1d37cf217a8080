"""Sources that read a client process's output (ssh, docker, kubectl): one client at a time, killed once."""

from __future__ import annotations

import asyncio
import contextlib

from bootwatch.sources.container_state import Death


class ClientFollower:
    """Holds the current client process; closing kills it exactly once and reaps it inside the loop."""

    def __init__(self) -> None:
        self.offset = 0  # bytes handed on (for silence detection; where ssh resumes)
        self._proc: asyncio.subprocess.Process | None = None
        self._dying: asyncio.subprocess.Process | None = None

    def close(self) -> None:
        # Once: a second kill() would reap the child behind asyncio's back ("Unknown child process").
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            self._dying = proc

    @property
    def bytes_read(self) -> int:
        return self.offset

    def death(self) -> Death | None:
        return None

    async def aclose(self) -> None:
        """Kill the client and reap it while the event loop still runs."""
        self.close()
        proc, self._dying = self._dying, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                await proc.wait()
