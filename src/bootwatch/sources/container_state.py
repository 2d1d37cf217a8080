"""What a container runtime says of the container bootwatch follows, in the terms bootwatch needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass
class Death:
    code: int | None
    signal: int | None
    reason: str


@dataclass(frozen=True)
class ContainerState:
    running: bool
    death: Death | None  # evidence that the server died, None while it lives (or is not there)
    restarts: int | None


def restarted(count: int | None, seen: int | None) -> bool:
    """Whether the restart count went up since it was last read: the launch being watched is over."""
    return count is not None and seen is not None and count > seen


class ContainerClient(Protocol):
    """A runtime's command-line client: its command lines, and how to read its answer about the container."""

    @property
    def state_failure(self) -> str:
        """What to say when the state command fails without a word on stderr."""
        ...

    def logs_argv(self, since: str | None) -> list[str]: ...

    def state_argv(self) -> list[str]: ...

    def read_state(self, out: str, restarts_seen: int | None) -> ContainerState: ...


__all__ = ["ContainerClient", "ContainerState", "Death", "restarted"]
