"""The `kubectl` client: its command lines and what `get pod -o json` says of the container followed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bootwatch.sources.container_state import ContainerState, Death, restarted

OOM_SIGNAL = 9  # the kernel's OOM killer sends SIGKILL


@dataclass(frozen=True)
class Terminated:
    exit_code: Any  # as the API wrote it (an int, in practice)
    reason: str | None


@dataclass(frozen=True)
class PodContainer:
    """One entry of a pod's status.containerStatuses, read."""

    name: str | None
    restarts: int | None
    running: bool
    terminated: Terminated | None  # this run's end, else the last run's

    @classmethod
    def parse(cls, status: dict[str, Any]) -> PodContainer:
        state = status.get("state") or {}
        term = state.get("terminated") or (status.get("lastState") or {}).get("terminated")
        return cls(
            status.get("name"),
            status.get("restartCount"),
            "running" in state,
            Terminated(term.get("exitCode"), term.get("reason")) if term else None,
        )


@dataclass(frozen=True)
class KubectlClient:
    pod: str
    namespace: str | None = None
    container: str | None = None  # None: the pod's first container

    state_failure = "kubectl get pod failed"

    def logs_argv(self, since: str | None) -> list[str]:
        return [
            "kubectl",
            "logs",
            "-f",
            "--timestamps",
            *self._namespace(),
            *([f"--since-time={since}"] if since else []),
            self.pod,
            *(["-c", self.container] if self.container else []),
        ]

    def state_argv(self) -> list[str]:
        return ["kubectl", "get", "pod", *self._namespace(), self.pod, "-o", "json"]

    def read_state(self, out: str, restarts_seen: int | None) -> ContainerState:
        c = self._followed(json.loads(out))
        if c is None:
            return ContainerState(False, None, None)
        return ContainerState(c.running, self._death(c, restarts_seen), c.restarts)

    def _namespace(self) -> list[str]:
        return ["-n", self.namespace] if self.namespace else []

    def _followed(self, pod: dict[str, Any]) -> PodContainer | None:
        statuses = pod.get("status", {}).get("containerStatuses") or []
        return next(
            (PodContainer.parse(c) for c in statuses if not self.container or c.get("name") == self.container), None
        )

    def _death(self, c: PodContainer, restarts_seen: int | None) -> Death | None:
        # A terminated state says the server died only if this run is the one that ended: the container is
        # not running, or it restarted since we last looked (lastState then holds the run we watched).
        term = c.terminated
        if term is None or (c.running and not restarted(c.restarts, restarts_seen)):
            return None
        why = term.reason or f"exit code {term.exit_code}"
        return Death(
            term.exit_code,
            OOM_SIGNAL if term.reason == "OOMKilled" else None,
            f"pod {self.pod} container {c.name} terminated: {why} (exit code {term.exit_code}, restarts {c.restarts})",
        )


__all__ = ["KubectlClient", "PodContainer", "Terminated"]
