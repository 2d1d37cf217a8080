"""What every source is: chunks of complete lines as they arrive, how far it has read, a death it saw, and
how to let it go. The session, the runner and every follower meet here (httpx's transport seam)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from bootwatch.sources.container_state import Death


class Source(Protocol):
    """A place turned into a stream of chunks of complete lines (a file, the server's own log, ssh, a container,
    journald, a replay, a test's script)."""

    @property
    def bytes_read(self) -> int:
        """Bytes handed over so far: the session's measure of output when no line has reached a rule."""
        ...

    def chunks(self) -> AsyncIterator[bytes]:
        """Chunks that end with a \\n; a file follower may also hand on a progress bar's \\r redraws (no \\n at all),
        which the analyzer takes as part of the line still being written."""
        ...

    def death(self) -> Death | None:
        """The server's death as the source saw it (a container that exited, a unit that failed), or None."""
        ...

    async def aclose(self) -> None:
        """Stop reading and release what the source holds (a client process is reaped inside the loop)."""
        ...


class OpenOptions(Protocol):
    """What a scheme's opener is given besides its Spec (bootwatch/opening.py's `Opening` is one): whether to
    read from the start, and where to say a note (waiting, reconnecting)."""

    @property
    def from_start(self) -> bool: ...

    def note(self, text: str) -> None: ...


@runtime_checkable
class Ends(Protocol):
    """A source that can be told its writer is gone (the server `run` started has exited): it reads what is left,
    hands on the partial last line too (a line that will never get its newline is complete), and ends."""

    def end_of_input(self) -> None: ...
