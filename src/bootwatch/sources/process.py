"""Launch the server ourselves: its own session, every byte straight into the log file.

The server's stdout and stderr are the log file itself (opened for append), not a pipe that bootwatch
must drain: the log is byte for byte what the server printed, and a slow terminal or a busy bootwatch
can never block or slow the server. Analysis follows the file behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from pathlib import Path

import psutil

from bootwatch.errors import UsageError


class ServerProcess:
    def __init__(self, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.log_path = log_path
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_offset = 0
        self.returncode: int | None = None

    def start(self) -> None:
        env = dict(os.environ if self.env is None else self.env)
        # Python servers block-buffer stdout when it is a file; the log would lag by kilobytes.
        env.setdefault("PYTHONUNBUFFERED", "1")
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as e:
            raise UsageError(f"cannot write the log file {self.log_path}: {e.strerror}") from None
        try:
            self.start_offset = os.fstat(fd).st_size
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, env=env,
                                         start_new_session=True, close_fds=True)
        except FileNotFoundError:
            raise UsageError(f"command not found: {self.argv[0]}") from None
        except PermissionError:
            raise UsageError(f"cannot execute: {self.argv[0]}") from None
        finally:
            os.close(fd)

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

    def tree(self) -> list[psutil.Process]:
        """The server and all its descendants (those still alive)."""
        try:
            root = psutil.Process(self.pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    def group_alive(self) -> bool:
        try:
            os.killpg(self.pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    async def stop(self, grace_s: float = 10.0) -> int | None:
        """SIGINT, then SIGTERM, then SIGKILL to the whole group: no orphan is left behind."""
        if self.proc is None:
            return None
        members = self.tree()
        for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if self.poll() is not None and not self.group_alive() and not _any_alive(members):
                break
            self._signal_group(sig)
            for p in members:  # children that left the group (setsid) still belong to us
                with contextlib.suppress(psutil.Error):
                    p.send_signal(sig)
            deadline = asyncio.get_running_loop().time() + wait
            while asyncio.get_running_loop().time() < deadline:
                if self.poll() is not None and not self.group_alive() and not _any_alive(members):
                    break
                await asyncio.sleep(0.05)
        return self.poll()


def _any_alive(procs: list[psutil.Process]) -> bool:
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            continue
    return False


def describe_exit(code: int | None) -> tuple[int | None, int | None]:
    """(exit code, signal) from a Popen returncode (negative = killed by a signal)."""
    if code is None:
        return None, None
    if code < 0:
        return None, -code
    if code > 128 and code - 128 in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGSEGV, signal.SIGABRT):
        return code, code - 128
    return code, None
