"""Launch the server ourselves: its own session, every byte straight into the log file, and a bounded stop.

The server's stdout and stderr are the log file itself (opened for append), not a pipe that bootwatch
must drain: the log is byte for byte what the server printed, and a slow terminal or a busy bootwatch
can never block or slow the server. bootwatch reads the very file it handed the server (the same inode,
opened once), so a logrotate that renames it does not lose the server's output.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import os
import re
import signal
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from signal import Signals
from typing import Protocol

import psutil

from bootwatch.errors import UsageError
from bootwatch.sources.chunks import newlines_before

PR_SET_PDEATHSIG = 1
# The stop: Ctrl-C once (what a user would do), then SIGTERM, then SIGKILL; each with its grace.
# members() scans every process: the probe and the tree's sampling ask for it many times a second.
MEMBERS_FRESH_S = 0.2
STOP_STEPS: tuple[tuple[Signals, float], ...] = ((signal.SIGINT, 10.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0))


class Hurry(Protocol):
    """What may cut a stop's grace short (a second Ctrl-C): see sources/interrupts.py."""

    count: int

    def next_request(self) -> asyncio.Event: ...


# ---- the log file ---------------------------------------------------------------------------------
@dataclass
class ServerLog:
    """The log file: the descriptor the server writes to, and one bootwatch reads from (the same file)."""

    path: Path
    write_fd: int
    read_fd: int
    start_offset: int
    created: bool
    lines_before: int = 0  # newlines in the file before start_offset: the server's first line is number this + 1

    @classmethod
    def open(cls, path: Path) -> ServerLog:
        """An existing regular file (appended to) or a new one, in a directory that exists."""
        parent = path.parent
        if not parent.is_dir():
            raise UsageError(f"--log {path}: the directory {parent} does not exist")
        existed = path.exists()
        if existed and path.is_file():
            from bootwatch.sources.file import pseudo_fs

            fs = pseudo_fs(path.stat().st_dev)
            if fs is not None:  # procfs, sysfs: no size to follow, and not a log the server can own
                raise UsageError(f"--log {path}: a {fs} file, not a log file")
        try:
            # O_NONBLOCK: opening a FIFO must fail or return at once, not wait for a reader.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as e:
            if e.errno == errno.ENXIO:
                raise UsageError(f"--log {path}: is a FIFO, not a regular file") from None
            if e.errno == errno.EISDIR:
                raise UsageError(f"--log {path}: is a directory, not a log file") from None
            raise UsageError(f"--log {path}: cannot write: {e.strerror}") from None
        return cls._complete(path, fd, created=not existed)

    @classmethod
    def create_default(cls, argv: list[str], directory: Path = Path(".")) -> ServerLog:
        """bootwatch-<cmd>-<time>-<pid>-<random>.log, created exclusively: two runs never share one."""
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(argv[0]).name) or "server"
        for _ in range(20):
            path = directory / (
                f"bootwatch-{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{os.urandom(3).hex()}.log"
            )
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o644)
            except FileExistsError:
                continue
            except OSError as e:
                raise UsageError(
                    f"cannot create a log file in {directory.resolve()}: {e.strerror} (give one with --log)"
                ) from None
            return cls._complete(path, fd, created=True)
        raise UsageError(f"cannot create a log file with a new name in {directory.resolve()} (give one with --log)")

    @classmethod
    def _complete(cls, path: Path, fd: int, created: bool) -> ServerLog:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            kind = "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a regular file"
            raise UsageError(f"--log {path}: is {kind}; the log must be a regular file")
        os.set_blocking(fd, True)
        try:
            # /proc/self/fd reopens the open file itself, never whatever is at the path by now.
            read_fd = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            read_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            rs = os.fstat(read_fd)
            if (rs.st_dev, rs.st_ino) != (st.st_dev, st.st_ino):
                os.close(read_fd)
                os.close(fd)
                raise UsageError(f"--log {path}: the file was replaced while it was opened") from None
        start = st.st_size
        if start and os.pread(read_fd, 1, start - 1) != b"\n":
            # An old last line without its newline: the server's first line starts a line of its own, not the
            # tail of that one (a rule anchored at the line's start would never see it).
            start += os.write(fd, b"\n")
        return cls(path, fd, read_fd, start, created, newlines_before(read_fd, start))

    def size(self) -> int:
        """How much the server has written, in the file it writes (not whatever is at the path now)."""
        try:
            return os.fstat(self.read_fd).st_size
        except OSError:
            return 0

    def out_of_space(self) -> bool:
        """Whether the log's filesystem has no block left for the server's next write (ENOSPC): a server that
        dies then dies of its own log, and the traceback that would say so could not be written either.
        Counted as the server (this user) sees it: root may write into the blocks kept for root."""
        try:
            st = os.fstatvfs(self.read_fd)
        except OSError:
            return False
        free = st.f_bfree if os.geteuid() == 0 else st.f_bavail
        return st.f_blocks > 0 and free == 0

    def close_write(self) -> None:
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def close(self) -> None:
        self.close_write()
        if self.read_fd >= 0:
            os.close(self.read_fd)
            self.read_fd = -1

    def discard(self) -> None:
        """The server never started: a log file we created and nobody wrote to goes away."""
        with contextlib.suppress(OSError):
            if self.created and os.fstat(self.read_fd).st_size == 0:
                self.path.unlink()
        self.close()


# ---- children that die with bootwatch -------------------------------------------------------------
def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A preexec hook: the child gets `sig` when bootwatch dies, even by SIGKILL (prctl PR_SET_PDEATHSIG).
    Only the child itself; its group is the guard's job (bootwatch/guard.py)."""
    parent = os.getpid()
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl  # resolved here: the forked child only calls it
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # bootwatch died before the prctl took hold
            os.kill(os.getpid(), sig)

    return hook


# ---- stopping a process group ---------------------------------------------------------------------
@dataclass
class Group:
    """A process group we started (leader pid = pgid) and the members seen to leave it (setsid)."""

    pgid: int
    seen: dict[int, psutil.Process] = field(default_factory=dict)

    def alive(self) -> bool:
        try:
            os.killpg(self.pgid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True

    def outside(self) -> list[psutil.Process]:
        """Descendants seen earlier that are now in another process group (a daemon that called setsid)."""
        out = []
        for p in self.seen.values():
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) != self.pgid:
                    out.append(p)
            except (psutil.Error, ProcessLookupError):
                continue
        return out

    def signal(self, sig: int) -> None:
        """Once to the group; individually only to members that left it (a group member must not get a
        Ctrl-C twice: llama-server takes the second as "terminate immediately")."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)
        for p in self.outside():
            with contextlib.suppress(psutil.Error):
                p.send_signal(sig)

    async def stop(
        self,
        reaped: Callable[[], bool],
        hurry: Hurry | None = None,
        steps: tuple[tuple[Signals, float], ...] = STOP_STEPS,
        begun_at: float | None = None,
    ) -> None:
        """Each step's signal, then its grace, until the leader is reaped and nothing of the group is left.
        A further stop request (`hurry`) skips to the next step at once.

        A cancellation of the task doing the stop is such a request too, never the end of the stop: in the
        Python API a second Ctrl-C or `task.cancel()` (or asyncio.run cancelling every task on its way out)
        lands here, and a stop abandoned half-way would leave the server's children running. The stop runs
        to its end (at most the sum of the graces), then the cancellation is raised."""
        loop = asyncio.get_running_loop()

        def gone() -> bool:
            return reaped() and not self.alive() and not self.outside()

        cancelled = False
        i = max(0, hurry.count - 1) if hurry is not None else 0  # signals that came before we began
        i = min(i, len(steps) - 1)
        while i < len(steps) and not gone():
            sig, grace = steps[i]
            if i == 0 and begun_at is not None:  # sent already (begin_stop): its grace counts from then
                deadline = begun_at + grace
            else:
                self.signal(sig)
                deadline = loop.time() + grace
            nudge = hurry.next_request() if hurry is not None else asyncio.Event()
            while loop.time() < deadline and not gone() and not nudge.is_set():
                try:
                    await asyncio.sleep(0.05)
                except asyncio.CancelledError:
                    cancelled = True
                    break  # the next, harsher step now
            i += 1
        if cancelled:
            raise asyncio.CancelledError


# ---- the server -----------------------------------------------------------------------------------
class ServerProcess:
    def __init__(
        self, argv: list[str], log: ServerLog, env: dict[str, str] | None = None, die_with_bootwatch: bool = True
    ) -> None:
        self.argv = argv
        self.log = log
        self.log_path = log.path
        self.env = env
        self.die_with_bootwatch = die_with_bootwatch  # not when it must outlive us (--detach, --keep)
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_offset = log.start_offset
        self.returncode: int | None = None
        self.group: Group | None = None
        self._stop_begun: float | None = None  # loop time of begin_stop's signal
        self._members: tuple[float, list[psutil.Process]] | None = None  # (when, what members() found)
        self._launcher: bool | None = None  # launcher_exited(), once decided

    def start(self) -> None:
        env = dict(os.environ if self.env is None else self.env)
        # Python servers block-buffer stdout when it is a file; the log would lag by kilobytes.
        env.setdefault("PYTHONUNBUFFERED", "1")
        hook = die_with_parent() if self.die_with_bootwatch else None
        fd = self.log.write_fd
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=fd,
                env=env,
                start_new_session=True,
                close_fds=True,
                preexec_fn=hook,
            )
        except FileNotFoundError:
            raise UsageError(f"command not found: {self.argv[0]}") from None
        except PermissionError:
            raise UsageError(f"cannot execute: {self.argv[0]}") from None
        except OSError as e:
            raise UsageError(f"cannot start {self.argv[0]}: {e.strerror}") from None
        finally:
            self.log.close_write()  # the server holds it now; ours would keep the file open for nothing
        self.group = Group(self.proc.pid)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def poll(self) -> int | None:
        if self.proc is None:
            return None
        if self.returncode is None:
            self.returncode = self.proc.poll()
        return self.returncode

    def log_size(self) -> int:
        return self.log.size()

    def tree(self) -> list[psutil.Process]:
        """The server and all its descendants (those still alive). Each one seen is remembered: a stop
        reaches it even after it left the group. Once the process we started has exited, what it left running
        (`members`) is the server."""
        if self.poll() is not None:
            return self.members()
        try:
            root = psutil.Process(self.pid)
            found = [root, *root.children(recursive=True)]
        except psutil.Error:
            return []
        if self.group is not None:
            for p in found[1:]:
                self.group.seen.setdefault(p.pid, p)
        return found

    def running_pid(self) -> int:
        """The server's pid now: the process we started, or, once a launcher exited 0, the first of what it left
        running (the pid `--detach` hands on)."""
        if self.poll() is None:
            return self.pid
        members = self.members()
        return members[0].pid if members else self.pid

    def launcher_exited(self) -> bool:
        """The process we started was a launcher: it exited 0 without a word in the log while its group runs on
        (`sh -c 'server &'`); what it left running is the server. One that printed before its exit 0 was the
        server (a graceful stop; helpers it left are stopped with the group). Decided once, when the exit is
        first seen: the backgrounded server writes the log afterwards."""
        if self.poll() != 0:
            return False
        if self._launcher is None:
            self._launcher = self.log.size() <= self.log.start_offset and bool(self.members())
        return self._launcher

    def ended(self) -> int | None:
        """The server's end (the returncode of the process we started), once nothing of it runs: a launcher's
        exit 0 with the server in the background is not the end, the group's is."""
        code = self.poll()
        if code is None or self.launcher_exited() and self.members():
            return None
        return code

    def members(self) -> list[psutil.Process]:
        """The processes of the server's group still running (zombies are not), and those seen to leave it:
        what is left once the process we started is gone (a launcher that put the server in the background and
        exited). Its children were reparented, so the group, not the tree, finds them."""
        if self.group is None:
            return []
        now = time.monotonic()
        if self._members is not None and now - self._members[0] < MEMBERS_FRESH_S:
            return self._members[1]
        found: dict[int, psutil.Process] = {}
        for p in psutil.process_iter():
            try:
                if os.getpgid(p.pid) == self.group.pgid and p.status() != psutil.STATUS_ZOMBIE:
                    found[p.pid] = p
            except (psutil.Error, ProcessLookupError, PermissionError):
                continue
        for p in self.group.outside():
            found.setdefault(p.pid, p)
        for p in found.values():
            self.group.seen.setdefault(p.pid, p)
        self._members = (now, list(found.values()))
        return self._members[1]

    def group_alive(self) -> bool:
        return self.group is not None and self.group.alive()

    def begin_stop(self) -> None:
        """The stop's first signal now, before the summary is written: a Ctrl-C reaches the server at once.
        `stop()` goes on from there (the first step's grace counts from now, its signal is not sent twice)."""
        if self.proc is None or self.group is None or self._stop_begun is not None:
            return
        self.tree()
        self.group.signal(STOP_STEPS[0][0])
        self._stop_begun = asyncio.get_running_loop().time()

    async def stop(
        self, hurry: Hurry | None = None, steps: tuple[tuple[Signals, float], ...] = STOP_STEPS
    ) -> int | None:
        """SIGINT, then SIGTERM, then SIGKILL to the whole group, each with its grace: no orphan is left."""
        if self.proc is None or self.group is None:
            return None
        self.tree()
        begun = self._stop_begun if steps is STOP_STEPS else None
        await self.group.stop(lambda: self.poll() is not None, hurry, steps, begun)
        return self.poll()


async def stop_process_group(
    proc: asyncio.subprocess.Process, hurry: Hurry | None = None, steps: tuple[tuple[Signals, float], ...] = STOP_STEPS
) -> None:
    """The same bounded stop for a process started with its own group (the --then command)."""
    await Group(proc.pid).stop(lambda: proc.returncode is not None, hurry, steps)


def describe_exit(code: int | None) -> tuple[int | None, int | None]:
    """(exit code, signal) from a Popen returncode (negative = killed by a signal)."""
    if code is None:
        return None, None
    if code < 0:
        return None, -code
    if code > 128 and code - 128 in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGSEGV, signal.SIGABRT):
        return code, code - 128
    return code, None
