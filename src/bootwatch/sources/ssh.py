"""Follow a file on another host through the system OpenSSH client.

One connection streams the file from a byte offset (`tail -c +N -F` on the remote side; nothing is
installed there). When the link drops, bootwatch reconnects with backoff and resumes at the exact byte it
had received: no line is lost or repeated. `~/.ssh/config`, agents, ProxyJump and known_hosts work as for
any `ssh` the user types; BOOTWATCH_SSH_CONFIG names another client config (the tests use one).

The remote path reaches the remote shell only as one single-quoted word: quotes, `$()`, backticks and `;`
in it are data, never run.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from bootwatch.errors import UsageError
from bootwatch.sources.chunks import READ_SIZE, LineChunker
from bootwatch.sources.client import ClientFollower
from bootwatch.sources.spec import Spec, parse_ssh_url

if TYPE_CHECKING:
    from bootwatch.sources.protocol import OpenOptions

NO_FILE, NO_TAIL = 66, 69  # exit codes of the remote preamble
FOLLOWING = "bootwatch: following"  # the preamble passed: the connection and the file are fine
BACKOFF = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
# sshd drops handshakes beyond MaxStartups (10 by default): with many sources on one host, at most this many
# connect at once; a slot is held until the remote side says it follows the file (or 3 s pass).
HANDSHAKES_PER_HOST = 6
_handshakes: dict[str, asyncio.Semaphore] = {}

_SSH_ERRORS = (
    ("Host key verification failed", "the host key of {host} is not the one known (known_hosts): refusing to connect"),
    ("REMOTE HOST IDENTIFICATION HAS CHANGED", "the host key of {host} has changed (known_hosts): refusing to connect"),
    ("Permission denied", "authentication to {host} failed (Permission denied): check the user, key or agent"),
    ("Could not resolve hostname", "cannot resolve host {host}"),
    ("Name or service not known", "cannot resolve host {host}"),
    ("Connection refused", "{host} refused the ssh connection (is sshd running on that port?)"),
    ("Connection timed out", "{host} is unreachable (connection timed out)"),
    ("No route to host", "{host} is unreachable (no route to host)"),
    ("Network is unreachable", "{host} is unreachable (network unreachable)"),
    ("Operation timed out", "{host} is unreachable (connection timed out)"),
)


def remote_command(path: str, offset: int) -> str:
    p = shlex.quote(path)
    return (
        f"command -v tail >/dev/null 2>&1 || "
        f"{{ echo 'bootwatch: no tail command on this host' >&2; exit {NO_TAIL}; }}; "
        f"test -e {p} || {{ echo 'bootwatch: no such file' >&2; exit {NO_FILE}; }}; "
        f"echo '{FOLLOWING}' >&2; exec tail -c +{offset + 1} -F -- {p}"
    )


def ssh_argv(spec: Spec, command: str) -> list[str]:
    argv = [
        "ssh",
        "-T",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=10",
        "-o",
        "ServerAliveInterval=5",
        "-o",
        "ServerAliveCountMax=3",
    ]
    config = os.environ.get("BOOTWATCH_SSH_CONFIG")
    if config:
        argv += ["-F", config]
    if spec.port:
        argv += ["-p", str(spec.port)]
    dest = f"{spec.user}@{spec.host}" if spec.user else spec.host
    return [*argv, "--", dest, command]


def explain(spec: Spec, code: int | None, stderr: str) -> str:
    if code == NO_FILE:
        return f"{spec.text}: no such file on {spec.host}"
    if code == NO_TAIL:
        return f"{spec.text}: {spec.host} has no `tail` command to follow the file with"
    for needle, message in _SSH_ERRORS:
        if needle in stderr:
            return f"{spec.text}: " + message.format(host=spec.host)
    last = stderr.strip().splitlines()[-1] if stderr.strip() else f"ssh exited with code {code}"
    return f"{spec.text}: ssh failed: {last}"


async def _read_stderr(stream: asyncio.StreamReader, connected: Callable[[], None]) -> bytes:
    """All of ssh's stderr; `connected()` as soon as the remote preamble says the file is being followed."""
    out = bytearray()
    while True:
        line = await stream.readline()
        if not line:
            return bytes(out)
        out += line
        if FOLLOWING.encode() in line:
            connected()


class SshFollower(ClientFollower):
    def __init__(self, spec: Spec, start: int = 0, note: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.spec = spec
        self.offset = start  # bytes of the remote file received so far (where a new connection resumes)
        self.note = note or (lambda _msg: None)
        self.reconnects = 0

    async def chunks(self) -> AsyncIterator[bytes]:
        chunker = LineChunker()
        connected_once = False
        failures = attempts = 0
        try:
            while True:
                slot = _handshakes.setdefault(self.spec.host, asyncio.Semaphore(HANDSHAKES_PER_HOST))
                await slot.acquire()
                held = [True]

                def release(held: list[bool] = held, slot: asyncio.Semaphore = slot) -> None:
                    if held[0]:
                        held[0] = False
                        slot.release()

                timer = asyncio.get_running_loop().call_later(3.0, release)
                try:
                    proc = await asyncio.create_subprocess_exec(
                        *ssh_argv(self.spec, remote_command(self.spec.path, self.offset)),
                        stdin=asyncio.subprocess.DEVNULL,
                        stdout=asyncio.subprocess.PIPE,
                        stderr=asyncio.subprocess.PIPE,
                    )
                except BaseException:
                    timer.cancel()
                    release()
                    raise
                self._proc = proc
                assert proc.stdout is not None and proc.stderr is not None
                err_task = asyncio.create_task(_read_stderr(proc.stderr, release))
                got = False
                while True:
                    block = await proc.stdout.read(READ_SIZE)
                    if not block:
                        break
                    got = True
                    failures = 0
                    timer.cancel()
                    release()
                    self.offset += len(block)
                    out = chunker.push(block)
                    if out:
                        yield out
                code = await proc.wait()
                timer.cancel()
                release()
                stderr = (await err_task).decode("utf-8", "replace")
                connected_once = connected_once or FOLLOWING in stderr
                attempts += 1
                # Never connected: a known refusal (host key, auth, DNS, no route) or repeated failures is
                # a usage error; a link cut once during the first handshake is just retried.
                hopeless = any(needle in stderr for needle, _ in _SSH_ERRORS) or attempts >= 8
                if code in (NO_FILE, NO_TAIL) or (not connected_once and hopeless):
                    raise UsageError(explain(self.spec, code, stderr))
                # The link dropped (or tail was killed): resume at the byte we stopped at.
                failures += 0 if got else 1
                delay = BACKOFF[min(failures, len(BACKOFF) - 1)]
                self.reconnects += 1
                self.note(
                    f"{self.spec.label}: connection lost ({explain(self.spec, code, stderr)}); "
                    f"reconnecting in {delay:g} s at byte {self.offset}"
                )
                await asyncio.sleep(delay)
        finally:
            self.close()


# ---- the scheme (sources/registry.py) -------------------------------------------------------------
def parse_spec(text: str) -> Spec:
    return parse_ssh_url(text)


def open_source(spec: Spec, opening: OpenOptions) -> SshFollower:
    return SshFollower(spec, note=opening.note)
