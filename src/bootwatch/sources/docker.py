"""The `docker` client (or podman behind a `docker` shim): its command lines and its state."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bootwatch.sources.container_state import ContainerState, Death, restarted

OOM_SIGNAL = 9  # the kernel's OOM killer sends SIGKILL


@dataclass(frozen=True)
class DockerState:
    """`docker inspect --format '{{json .State}} {{.RestartCount}}'`, read."""

    running: bool
    exit_code: Any  # as docker wrote it (an int, in practice)
    oom_killed: bool
    restarts: int | None

    @classmethod
    def parse(cls, out: str) -> DockerState:
        state_json, _, restarts = out.strip().rpartition(" ")
        state = json.loads(state_json)
        return cls(
            bool(state.get("Running")),
            state.get("ExitCode"),
            bool(state.get("OOMKilled")),
            int(restarts) if restarts.isdigit() else None,
        )


@dataclass(frozen=True)
class DockerClient:
    container: str

    state_failure = "docker inspect failed"

    def logs_argv(self, since: str | None) -> list[str]:
        return ["docker", "logs", "-f", "--timestamps", *(["--since", since] if since else []), self.container]

    def state_argv(self) -> list[str]:
        return ["docker", "inspect", "--format", "{{json .State}} {{.RestartCount}}", self.container]

    def read_state(self, out: str, restarts_seen: int | None) -> ContainerState:
        st = DockerState.parse(out)
        if st.running:
            return ContainerState(True, self._restart_death(st, restarts_seen), st.restarts)
        why = "OOMKilled" if st.oom_killed else f"exited with code {st.exit_code}"
        signal = OOM_SIGNAL if st.oom_killed else None
        return ContainerState(False, Death(st.exit_code, signal, f"container {self.container} {why}"), st.restarts)

    def _restart_death(self, st: DockerState, restarts_seen: int | None) -> Death | None:
        # Running again after a restart: the restart policy brought it back, the launch watched is over.
        if not restarted(st.restarts, restarts_seen):
            return None
        return Death(
            st.exit_code, None, f"container {self.container} restarted (restart count {st.restarts}): the server died"
        )


__all__ = ["DockerClient", "DockerState"]
