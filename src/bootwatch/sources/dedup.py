"""Drop the lines a reattached container log stream sends again.

`docker logs --since` and `kubectl logs --since-time` resume from a timestamp, not a line: the new stream
starts with every line stamped at the latest timestamp already had (and, with some runtimes, a few before it).
Several lines often share a stamp, so the ones had are counted, whole, and each is dropped once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class ReattachDedup:
    """Strips the runtime's stamp off each line, remembering where to resume and what a resume resends."""

    since: str | None = None  # the latest stamp had: where a reattach resumes
    seen_at_since: Counter[bytes] = field(default_factory=Counter)  # the stamped lines had at `since`
    _resent: Counter[bytes] = field(default_factory=Counter, init=False, repr=False)

    @classmethod
    def resuming(cls, since: str, seen: Iterable[bytes]) -> ReattachDedup:
        """The state after a stream whose last lines, all stamped `since`, were `seen`; a new stream begins."""
        dedup = cls(since, Counter(seen))
        dedup.reattached()
        return dedup

    def reattached(self) -> None:
        """A new stream starts from `since`: it will send again what was had at that stamp."""
        self._resent = Counter(self.seen_at_since)

    def take(self, line: bytes) -> bytes | None:
        """The message of one line as the runtime sent it (newline included), or None when it was had before."""
        ts, sep, rest = line.partition(b" ")
        if not sep:
            return line  # no timestamp: nothing to resume by, pass it on
        stamp = ts.decode("ascii", "replace")
        if self.since is not None and stamp < self.since:
            return None  # before what we already had
        if stamp == self.since and self._resent[line] > 0:
            self._resent[line] -= 1  # had it before the reattach
            return None
        if stamp != self.since:
            self.since, self.seen_at_since = stamp, Counter()
        self.seen_at_since[line] += 1
        return rest

    def filter(self, data: bytes) -> bytes:
        """Complete lines in (each ending in a newline), the messages not had before out."""
        # Split on \n only: a progress bar's \r updates belong to their line.
        kept = (self.take(line + b"\n") for line in data[:-1].split(b"\n"))
        return b"".join(k for k in kept if k is not None)


__all__ = ["ReattachDedup"]
