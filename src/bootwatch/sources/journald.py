"""journald://[namespace/]UNIT: a systemd unit's output, through the system `journalctl -u UNIT -f -o json`.

JSON keeps what `-o cat` loses: each entry's time (`__REALTIME_TIMESTAMP`, µs) and its message byte for byte
(journalctl writes a message that is not valid UTF-8, or holds control characters, as an array of byte
values). Each entry becomes `<ISO time>Z <message>`, a collector stamp that lines/prefixes.py peels, keeping
the time, before the server's own prefix. The unit's entries of the current boot are read, then followed (with
--from-start: every boot's); if journalctl ends, it is started again after the last entry's cursor. systemd's
own "Main process exited, code=..., status=..." entry about the unit is the server's death, unless the unit
speaks again after it (a restart: that death was an earlier launch's).
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from bootwatch.errors import UsageError
from bootwatch.sources.chunks import READ_SIZE, LineChunker
from bootwatch.sources.client import ClientFollower
from bootwatch.sources.container_state import Death
from bootwatch.sources.spec import Spec

if TYPE_CHECKING:
    from bootwatch.sources.protocol import OpenOptions

REATTACH_PAUSE_S = 0.5
# A unit name (systemd.unit(5)): letters, digits, ":-_.\@", and a type suffix; a bare name means .service.
_SPEC = re.compile(r"^journald://(?:(?P<ns>[A-Za-z0-9_.\-]+)/)?(?P<unit>[A-Za-z0-9:_.\\@\-]+)$")
# systemd's wording (src/core/service.c, service_sigchld_event): "Main process exited, code=%s, status=%i/%s".
_EXITED = re.compile(r"Main process exited, code=(?P<code>exited|killed|dumped), status=(?P<status>\d+)/(?P<name>\w+)")


@dataclass(frozen=True)
class JournaldSpec(Spec):
    unit: str = ""
    journal_namespace: str | None = None

    @property
    def label(self) -> str:
        return self.unit


def parse_spec(text: str) -> Spec:
    m = _SPEC.match(text)
    if not m:
        raise UsageError(f"bad journald source {text!r}: expected journald://[namespace/]UNIT")
    unit = m.group("unit")
    if "." not in unit:
        unit += ".service"  # what systemctl and journalctl -u assume too
    return JournaldSpec("journald", text, unit=unit, journal_namespace=m.group("ns"))


def open_source(spec: Spec, opening: OpenOptions) -> JournaldFollower:
    assert isinstance(spec, JournaldSpec)
    return JournaldFollower(spec, every_boot=opening.from_start, note=opening.note)


def journalctl_argv(spec: JournaldSpec, cursor: str | None, every_boot: bool) -> list[str]:
    argv = ["journalctl", f"--unit={spec.unit}", "--follow", "--output=json", "--no-pager"]
    argv.append("--output-fields=MESSAGE,UNIT")  # __CURSOR and __REALTIME_TIMESTAMP always come
    if spec.journal_namespace:
        argv.append(f"--namespace={spec.journal_namespace}")
    if cursor is not None:
        argv.append(f"--after-cursor={cursor}")
    else:
        argv += ["--lines=all"] + ([] if every_boot else ["--boot"])
    return argv


def message_bytes(value: Any) -> bytes:
    """MESSAGE as journalctl's JSON gives it: a string, an array of byte values, or null."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace")
    if isinstance(value, list):
        return bytes(v for v in value if isinstance(v, int) and 0 <= v < 256)
    return b""


def entry_line(entry: dict[str, Any]) -> bytes:
    """One entry as lines of `<ISO time>Z <message>`: the stamp on each line of a multi-line message."""
    stamp = b""
    us = entry.get("__REALTIME_TIMESTAMP")
    if isinstance(us, str) and us.isdigit():
        when = datetime.fromtimestamp(int(us) / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
        stamp = when.encode() + b"Z "
    lines = message_bytes(entry.get("MESSAGE")).split(b"\n")
    return b"".join(stamp + line + b"\n" for line in lines)


def death_of(entry: dict[str, Any], unit: str) -> Death | None:
    """systemd's own entry about the unit's main process ending (`UNIT=` is the unit it speaks of)."""
    if entry.get("UNIT") != unit:
        return None
    m = _EXITED.search(message_bytes(entry.get("MESSAGE")).decode("utf-8", "replace"))
    if m is None:
        return None
    status = int(m.group("status"))
    reason = f"{unit}: main process {m.group('code')}, status={status}/{m.group('name')}"
    if m.group("code") == "exited":
        return Death(status, None, reason)
    return Death(None, status if status in signal.valid_signals() else None, reason)


class JournaldFollower(ClientFollower):
    def __init__(self, spec: JournaldSpec, every_boot: bool = False, note: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.spec = spec
        self.every_boot = every_boot
        self.note = note or (lambda _msg: None)
        self.cursor: str | None = None  # the last entry handed on: where journalctl starts again
        self._death: Death | None = None

    def death(self) -> Death | None:
        return self._death

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            while True:
                try:
                    proc = await asyncio.create_subprocess_exec(
                        *journalctl_argv(self.spec, self.cursor, self.every_boot),
                        stdin=asyncio.subprocess.DEVNULL,
                        stdout=asyncio.subprocess.PIPE,
                        stderr=asyncio.subprocess.PIPE,
                    )
                except FileNotFoundError:
                    raise UsageError("`journalctl` is not installed (needed for journald sources)") from None
                self._proc = proc
                got = False
                async for payload in self._entries(proc):
                    got = True
                    yield payload
                code = await proc.wait()
                assert proc.stderr is not None
                err = (await proc.stderr.read()).decode("utf-8", "replace").strip()
                if code != 0 and not got and self.cursor is None:
                    raise UsageError(f"{self.spec.text}: {err or f'journalctl exited {code}'}")
                self.note(f"{self.spec.label}: journalctl ended ({err or f'exit {code}'}); following again")
                await asyncio.sleep(REATTACH_PAUSE_S)
        finally:
            self.close()

    async def _entries(self, proc: asyncio.subprocess.Process) -> AsyncIterator[bytes]:
        """journalctl's JSON lines, to its end, as the log lines they carry."""
        assert proc.stdout is not None
        chunker = LineChunker()
        while True:
            block = await proc.stdout.read(READ_SIZE)
            data = chunker.push(block) if block else chunker.flush()
            payload = b"".join(self._line(raw) for raw in data.splitlines()) if data else b""
            if payload:
                self.offset += len(payload)
                yield payload
            if not block:
                return

    def _line(self, raw: bytes) -> bytes:
        try:
            entry = json.loads(raw)
        except ValueError:
            return raw + b"\n"  # cut to its head and tail (over-long): kept as it is rather than lost
        if not isinstance(entry, dict):
            return raw + b"\n"
        cursor = entry.get("__CURSOR")
        if isinstance(cursor, str):
            self.cursor = cursor
        died = death_of(entry, self.spec.unit)
        if died is not None:
            self._death = died
        elif "UNIT" not in entry:
            self._death = None  # the unit's own output again: an earlier launch's death is not this one's
        return entry_line(entry)
