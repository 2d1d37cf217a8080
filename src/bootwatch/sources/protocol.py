"""What every source is: complete lines as they arrive, how far it has read, and how to let it go."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol


class Source(Protocol):
    """A place turned into a stream of chunks of complete lines (file, the server's own log, ssh, a container,
    a replay, a test's script). `offset` is how many bytes it has handed over: the session's measure of
    output when no line has reached a rule."""

    offset: int

    def chunks(self) -> AsyncIterator[bytes]: ...
