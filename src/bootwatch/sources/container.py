"""Follow a container's or a pod's output through the `docker` and `kubectl` clients.

`logs -f --timestamps` streams the output; each line carries the runtime's timestamp, which bootwatch
strips before analysis and keeps to resume: when the stream ends (container restart, node log rotation) it
checks the state, and if the container runs again it reattaches from the last timestamp and drops the
lines it already had. A container that exited, was OOM-killed, or a pod whose restart count went up is
evidence that the server died.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import TYPE_CHECKING

from bootwatch.errors import UsageError
from bootwatch.sources.chunks import READ_SIZE, LineChunker
from bootwatch.sources.client import ClientFollower
from bootwatch.sources.container_state import ContainerClient, ContainerState, Death, restarted
from bootwatch.sources.dedup import ReattachDedup
from bootwatch.sources.docker import DockerClient
from bootwatch.sources.kubectl import KubectlClient
from bootwatch.sources.spec import Spec, parse_container

if TYPE_CHECKING:
    from bootwatch.sources.protocol import OpenOptions

REATTACH_PAUSE_S = 0.5  # lets a restarting container come up before its logs are asked for again


async def _run(argv: list[str]) -> tuple[int, str, str]:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
    except FileNotFoundError:
        raise UsageError(f"`{argv[0]}` is not installed (needed for {argv[0]} sources)") from None
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def client_for(spec: Spec) -> ContainerClient:
    if spec.kind == "docker":
        return DockerClient(spec.container or "")
    return KubectlClient(spec.pod or "", spec.namespace, spec.container)


class ContainerFollower(ClientFollower):
    def __init__(self, spec: Spec, note: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.spec = spec
        self.client = client_for(spec)
        self.note = note or (lambda _msg: None)
        self._death: Death | None = None
        self.restarts_seen: int | None = None

    def death(self) -> Death | None:
        """The exit, OOM kill or restart the runtime reported once the logs stream ended."""
        return self._death

    async def _state(self) -> ContainerState:
        code, out, err = await _run(self.client.state_argv())
        if code != 0:
            raise UsageError(f"{self.spec.text}: {err.strip() or self.client.state_failure}")
        return self.client.read_state(out, self.restarts_seen)

    async def chunks(self) -> AsyncIterator[bytes]:
        dedup = ReattachDedup()
        try:
            # The count the launch started with; a death already on record is an earlier launch's.
            self.restarts_seen = (await self._state()).restarts
            while True:
                proc = await self._open_logs(dedup.since)
                async with aclosing(self._stream(proc, dedup)) as stream:
                    async for payload in stream:
                        yield payload
                if await self._died_after(proc, dedup.since):
                    return
                await asyncio.sleep(REATTACH_PAUSE_S)
        finally:
            self.close()

    async def _open_logs(self, since: str | None) -> asyncio.subprocess.Process:
        proc = await asyncio.create_subprocess_exec(
            *self.client.logs_argv(since),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        self._proc = proc
        return proc

    async def _stream(self, proc: asyncio.subprocess.Process, dedup: ReattachDedup) -> AsyncGenerator[bytes, None]:
        """The messages of one logs stream, to its end, without what an earlier stream had."""
        assert proc.stdout is not None
        chunker = LineChunker()
        dedup.reattached()
        while True:
            block = await proc.stdout.read(READ_SIZE)
            data = chunker.push(block) if block else chunker.flush()
            payload = dedup.filter(data) if data else b""
            if payload:
                self.offset += len(payload)
                yield payload
            if not block:
                return

    async def _died_after(self, proc: asyncio.subprocess.Process, since: str | None) -> bool:
        """Once a logs stream ended: whether the server died (noted in `death`), else why we reattach."""
        assert proc.stderr is not None
        await proc.wait()
        err = (await proc.stderr.read()).decode("utf-8", "replace")
        state = await self._state()
        if state.death is not None:
            self._death = state.death
            self.note(f"{self.spec.label}: {state.death.reason}")
            return True
        if proc.returncode not in (0, None) and not state.running and since is None:
            # Nothing came and nothing runs: the client's own complaint (no such container, no access).
            raise UsageError(f"{self.spec.text}: {err.strip() or 'logs failed'}")
        if restarted(state.restarts, self.restarts_seen):
            self.note(f"{self.spec.label}: restarted ({state.restarts} restarts); reattaching")
        self.restarts_seen = state.restarts
        self.note(f"{self.spec.label}: log stream ended; reattaching from {since}")
        return False


# ---- the schemes (sources/registry.py) ------------------------------------------------------------
def parse_spec(text: str) -> Spec:
    return parse_container(text)


def open_source(spec: Spec, opening: OpenOptions) -> ContainerFollower:
    return ContainerFollower(spec, note=opening.note)


__all__ = ["ContainerFollower", "Death", "client_for"]
