"""The guard: a tiny process that stops what `bootwatch run` started if bootwatch itself dies.

bootwatch handles every signal it can catch by stopping the server itself; SIGKILL (the OOM killer, `kill
-9`, a crashed terminal multiplexer) it cannot catch. So `run` starts this guard first, in a session of its
own (a closed terminal or a Ctrl-C do not reach it), with the read end of a pipe as its stdin. bootwatch
writes `watch PGID` for each process group it starts, and `release` once nothing is left to stop (it
stopped them, or leaves them running on purpose: --detach, --keep). When the pipe closes without
`release`, bootwatch is gone: each group still alive gets SIGTERM, then SIGKILL after the grace.

Run as `python -I -S /abs/path/guard.py GRACE_S`, never `python -m bootwatch.guard`: `-m` puts the current
directory first on sys.path, so a `./bootwatch/guard.py` planted there would run as the user, and an empty
`./bootwatch/__init__.py` would silently leave no guard at all. Isolated (`-I`: no cwd, no script directory, no
PYTHON* variables, no user site; `-S`: no site) it imports the standard library only. It says `up` on its
stdout once its signals are set; bootwatch waits for that word and refuses to start a server without it.
It imports nothing heavy: it must be up in milliseconds.
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
UP_TIMEOUT_S = 10.0  # a loaded machine can take seconds to start a Python; a guard never up is refused
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
    with contextlib.suppress(OSError):
        os.write(1, b"up\n")  # bootwatch waits for this before it starts anything
        os.close(1)
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


if __name__ == "__main__":  # the guard itself: it stops here, before anything below imports bootwatch
    sys.exit(main(sys.argv[1:]))

from bootwatch.errors import UsageError  # noqa: E402  (bootwatch's side only; the guard runs without it)


def guard_argv(grace_s: float) -> list[str]:
    """The guard's command line: this very file, by absolute path, in an isolated interpreter."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), str(grace_s)]


class GuardNotUp(UsageError):
    """The guard did not come up: bootwatch starts no server it could not stop if killed."""


class Guard:
    """bootwatch's end of the pipe."""

    def __init__(self, grace_s: float = GRACE_S, up_timeout_s: float = UP_TIMEOUT_S) -> None:
        read_end, self._w = os.pipe()  # both ends non-inheritable: no server or --then command holds them
        up_r, up_w = os.pipe()
        try:
            self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                guard_argv(grace_s),
                stdin=read_end,
                stdout=up_w,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as e:
            os.close(self._w)
            raise GuardNotUp(f"could not start bootwatch's guard ({e.strerror or e}); no server started") from e
        finally:
            os.close(read_end)
            os.close(up_w)
        try:
            said = _read_up(up_r, up_timeout_s)
        finally:
            os.close(up_r)
        if said != b"up\n":
            code = None
            with contextlib.suppress(subprocess.TimeoutExpired):  # its stdout closed: it is exiting
                code = self.proc.wait(timeout=0.5) if self.proc is not None else None
            why = f"it exited with code {code}" if code is not None else f"no answer in {up_timeout_s:.0f} s"
            self._abandon()
            raise GuardNotUp(
                f"bootwatch's guard (which stops the server if bootwatch is killed) did not come up ({why});"
                " no server started"
            )

    def _abandon_pipe_only(self) -> None:
        """Close our end without `release`: to the guard, bootwatch is gone (and its groups get stopped)."""
        if self._w >= 0:
            os.close(self._w)
            self._w = -1

    def _abandon(self) -> None:
        self._abandon_pipe_only()
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=2.0)
            self.proc = None

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


def _read_up(fd: int, timeout_s: float) -> bytes:
    """What the guard said on its stdout before it closed it (or before the time ran out)."""
    said = b""
    deadline = time.monotonic() + timeout_s
    while len(said) < 3:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        data = os.read(fd, 16)
        if not data:
            break
        said += data
    return said


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
