"""The guard: a tiny process that stops what `bootwatch run` started if bootwatch itself dies.

bootwatch handles every signal it can catch by stopping the server itself; SIGKILL (the OOM killer, `kill
-9`, a crashed terminal multiplexer) it cannot catch. So `run` starts this guard first, in a session of its
own (a closed terminal or a Ctrl-C do not reach it), with the read end of a pipe as its stdin. bootwatch
writes `watch PGID` for each process group it starts, and `release` once nothing is left to stop (it
stopped them, or leaves them running on purpose: --detach, --keep). When the pipe closes without
`release`, bootwatch is gone: each group still alive gets SIGTERM, then SIGKILL after the grace.

Run as `python -m bootwatch.guard GRACE_S`. It imports nothing heavy: it must be up in milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bootwatch.sources.process import ServerLog, ServerProcess

GRACE_S = 5.0
CHECK_S = 0.5  # how often groups that ended are forgotten (their number may be reused later)


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_groups(groups: set[int], grace_s: float) -> None:
    """SIGTERM to each group, SIGKILL to those still there after `grace_s`."""
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(g) for g in groups):
        time.sleep(0.05)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def main(argv: list[str]) -> int:
    grace_s = float(argv[0]) if argv else GRACE_S
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
    groups: set[int] = set()
    pending = b""
    while True:
        readable, _, _ = select.select([0], [], [], CHECK_S)
        if readable:
            data = os.read(0, 4096)
            if not data:
                break  # bootwatch is gone and never said release
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                word, _, arg = line.decode("ascii", "replace").partition(" ")
                if word == "release":
                    return 0
                if word == "watch" and arg.isdigit():
                    groups.add(int(arg))
                elif word == "forget" and arg.isdigit():
                    groups.discard(int(arg))
        groups = {g for g in groups if _alive(g)}
    stop_groups(groups, grace_s)
    return 0


class Guard:
    """bootwatch's end of the pipe."""

    def __init__(self, grace_s: float = GRACE_S) -> None:
        read_end, self._w = os.pipe()  # both ends non-inheritable: no server or --then command holds them
        try:
            self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-m", "bootwatch.guard", str(grace_s)],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        finally:
            os.close(read_end)

    def _say(self, text: str) -> None:
        if self._w < 0:
            return
        with contextlib.suppress(OSError):  # a guard that died cannot be helped; bootwatch goes on
            os.write(self._w, text.encode() + b"\n")

    def watch(self, pgid: int) -> None:
        self._say(f"watch {pgid}")

    def forget(self, pgid: int) -> None:
        self._say(f"forget {pgid}")

    def release(self) -> None:
        """Nothing is left for the guard to stop: it exits."""
        self._say("release")
        if self._w >= 0:
            os.close(self._w)
            self._w = -1
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=2.0)  # it exits at once; reaped, it leaves no zombie
            self.proc = None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def start_guarded(process: ServerProcess, log: ServerLog, guard: Guard) -> None:
    """Start the server and put its group under the guard; a server that cannot start leaves nothing behind
    (no guard waiting, no empty log file of its own)."""
    try:
        process.start()
    except BaseException:
        guard.release()
        log.discard()
        raise
    assert process.group is not None
    guard.watch(process.group.pgid)
