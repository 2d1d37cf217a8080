"""Follow a log file like `tail -F`: it may not exist yet, may be truncated, rewritten, rotated or replaced.

New data is noticed through inotify (asyncinotify) and, as a fallback where events do not arrive (NFS,
some container mounts), by a stat poll; a symlink is watched in its target's directory too. Only complete
lines are handed on, and a \r progress bar's redraws (LineChunker.updates/current); any other partial last
line waits for its newline.

A file is known by its device and inode *and* by two blocks of its bytes: its first ones (up to FINGERPRINT
of them, as Vector does) and the last ones we read, just before the offset we hold. A log truncated and
written again past the old offset before we look has the same inode and a size that never went down; a
changed head tells that the offset now points into another file's middle, and so does a changed block
before the offset when the new content starts as the old one did (llama.cpp's first lines carry no time,
so a restart with `>` writes the same first 256 bytes again). Appending never changes either block. A FIFO is read as a stream (no offsets, no seeking). What cannot be followed is
refused with a UsageError: devices, and procfs/sysfs files, whose size the kernel does not report (a
follower would see them "truncated" on every read and spin).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import os
import stat
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bootwatch.errors import UsageError
from bootwatch.sources.chunks import READ_SIZE, LineChunker, pieces
from bootwatch.sources.container_state import Death
from bootwatch.sources.encoding import sniff
from bootwatch.sources.interrupts import turn
from bootwatch.waiting import wait_event

POLL_S = 1.0  # fallback stat poll when no file event arrives
FINGERPRINT = 256  # bytes at the head of a file that identify it along with its inode

# Filesystems whose files are made up on read: their st_size is 0 (procfs) or a page (sysfs) whatever they
# hold, and inotify says nothing when they change.
PSEUDO_FS = frozenset(
    {
        "proc",
        "sysfs",
        "cgroup",
        "cgroup2",
        "debugfs",
        "tracefs",
        "securityfs",
        "configfs",
        "pstore",
        "bpf",
        "efivarfs",
        "fusectl",
        "binfmt_misc",
    }
)


class Kind(enum.Enum):
    FILE = "file"  # regular: offsets, rotation, truncation
    STREAM = "stream"  # FIFO: read what comes, to the writer's close


def pseudo_fs(st_dev: int) -> str | None:
    """The type of the pseudo filesystem (procfs, sysfs, ...) that holds a file on device `st_dev`, if it is one."""
    want = f"{os.major(st_dev)}:{os.minor(st_dev)}"
    try:
        text = Path("/proc/self/mountinfo").read_text("utf-8", "replace")
    except OSError:  # not Linux, or no /proc: the follower's own guard catches a file that reads past its size
        return None
    for line in text.splitlines():
        # 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw   (optional fields end at " - ")
        fields = line.split()
        if len(fields) > 3 and fields[2] == want and "-" in fields[3:]:
            fstype = fields[fields.index("-", 3) + 1] if fields.index("-", 3) + 1 < len(fields) else ""
            return fstype if fstype in PSEUDO_FS else None
    return None


def classify(path: str | os.PathLike[str], st: os.stat_result, follow: bool = True) -> Kind:
    """How a file can be read, or a UsageError saying why it cannot. `follow`: for watch (followed as it
    grows), else for report (read once to its end)."""
    mode = st.st_mode
    if stat.S_ISREG(mode):
        fs = pseudo_fs(st.st_dev) if follow else None
        if fs is not None:
            raise UsageError(
                f"{path}: a {fs} file, whose size the kernel does not report: it cannot be followed "
                "(`bootwatch report` reads it once)"
            )
        return Kind.FILE
    if stat.S_ISFIFO(mode):
        return Kind.STREAM
    if stat.S_ISDIR(mode):
        raise UsageError(f"{path}: is a directory, not a log file")
    if stat.S_ISCHR(mode):
        raise UsageError(f"{path}: is a character device, not a log file")
    if stat.S_ISBLK(mode):
        raise UsageError(f"{path}: is a block device, not a log file")
    if stat.S_ISSOCK(mode):
        raise UsageError(f"{path}: is a socket, not a log file (a FIFO made with mkfifo can be followed)")
    raise UsageError(f"{path}: not a regular file or a FIFO")


def check_path(path: str | os.PathLike[str], follow: bool = True) -> Kind | None:
    """`classify` for a path, without opening it (opening a FIFO waits for a writer); None if it does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror}") from None
    return classify(path, st, follow)


class FileFollower:
    def __init__(
        self,
        path: str | os.PathLike[str],
        start: int = 0,
        poll_s: float = POLL_S,
        events: bool = True,
        note: Callable[[str], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.start = start
        self.poll_s = poll_s
        self.events = events
        self.note = note or (lambda text: None)
        self._wake = asyncio.Event()
        self._watch_task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self.offset = 0
        self.rotations = 0
        self.truncations = 0
        self.rewrites = 0
        self.kind: Kind | None = None  # of the file open now
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None
        self._head = b""  # the first bytes of the file as we read them: its fingerprint
        self._mark = b""  # the last bytes read, which end at self.offset: they change when the file is rewritten
        self._past_size = 0  # reads in a row that ended past the size the file reports (twice: a pseudo file)
        self._writer_seen = False  # a FIFO: has a writer opened it since we did?

    def _places(self) -> dict[Path, set[str]]:
        """The directories to watch and the names in them that matter: the path's own, and for a symlink every
        hop of it down to the file it names (a log linked from another directory is written there, and the
        link's own directory hears nothing of it)."""
        places: dict[Path, set[str]] = {}
        p = self.path
        for _ in range(40):  # the kernel's own limit on a chain of links
            directory = p.parent if p.parent.exists() else Path(".")
            places.setdefault(directory, set()).add(p.name)
            try:
                target = os.readlink(p)
            except OSError:  # not a link (or not there): the end of the chain
                break
            p = p.parent / target
        return places

    async def _watch(self) -> None:
        """inotify on the file's directory (the file may not exist yet, or be replaced), and on its target's for
        a symlink: no wake-up at all while nothing is written, a few milliseconds when something is."""
        from asyncinotify import Inotify, Mask

        mask = (
            Mask.MODIFY | Mask.CREATE | Mask.MOVED_TO | Mask.MOVED_FROM | Mask.DELETE | Mask.CLOSE_WRITE | Mask.ATTRIB
        )
        with contextlib.suppress(OSError), Inotify() as inotify:  # no inotify (NFS, limits): the poll runs
            names: dict[int, set[str]] = {}  # watch descriptor -> the names that matter in its directory
            watches: dict[Path, int] = {}

            def place() -> None:
                names.clear()
                for directory, wanted in self._places().items():
                    if directory not in watches:
                        try:
                            watches[directory] = inotify.add_watch(directory, mask).wd
                        except OSError:  # that directory cannot be watched: the poll covers it
                            continue
                    names[watches[directory]] = wanted

            place()
            async for event in inotify:
                wd = event.watch.wd if event.watch is not None else None
                if event.name is None or event.name.name in names.get(wd, ()):  # type: ignore[arg-type]
                    self._wake.set()
                    if not event.mask & Mask.MODIFY:
                        place()  # a link may have been made, removed or pointed elsewhere: follow where it goes now

    async def _wait(self) -> None:
        if self._watch_task is None and self.events:
            self._watch_task = asyncio.create_task(self._watch())
        await wait_event(self._wake, self.poll_s)
        self._wake.clear()

    def close(self) -> None:
        """Stop watching the directory. The descriptor is the reading generator's: it closes it when it ends."""
        self._stop.set()
        if self._watch_task is not None:
            self._watch_task.cancel()

    # ---- the Source protocol (sources/protocol.py) ----------------------------------------------------
    @property
    def bytes_read(self) -> int:
        return self.offset

    def death(self) -> Death | None:
        return None  # a file cannot tell; the log itself (or --pid) says how the server ended

    async def aclose(self) -> None:
        self.close()

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd, self._ident, self._head, self._mark = None, None, b"", b""

    # ---- opening -------------------------------------------------------------------------------------
    async def _open(self) -> None:
        """Open what is at the path, waiting for it to appear; refuse what cannot be followed."""
        waited = False
        while True:
            try:
                # O_NONBLOCK: a FIFO opens at once, writer or not (its reads then go through the event loop).
                fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
                break
            except FileNotFoundError:
                if not waited:
                    self.note(f"waiting for {self.path} to appear")
                    waited = True
                await self._wait()
            except OSError as e:
                raise UsageError(f"{self.path}: cannot open: {e.strerror}") from None
        try:
            st = os.fstat(fd)
            kind = classify(self.path, st)
        except BaseException:
            os.close(fd)
            raise
        if waited:
            self.note(f"{self.path} appeared; following it")
        self._fd, self._ident, self.kind = fd, (st.st_dev, st.st_ino), kind
        if kind is Kind.STREAM:
            self.start, self._writer_seen = 0, False
            return
        os.set_blocking(fd, True)  # a regular file never blocks; plain reads from here
        self.offset = self.start if self.start <= st.st_size else 0
        self.start = 0  # only the first file opened starts late
        self._head = os.pread(fd, min(FINGERPRINT, self.offset), 0)
        self._mark = os.pread(fd, min(FINGERPRINT, self.offset), self.offset - min(FINGERPRINT, self.offset))
        os.lseek(fd, self.offset, os.SEEK_SET)

    # ---- regular files -------------------------------------------------------------------------------
    def _changed(self) -> str | None:
        """Is the open file still the one we have been reading? Looked at before each read, so that bytes
        from a rewritten file are never taken for the continuation of the old one."""
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        if size < self.offset:
            return "truncated"
        if self._head and os.pread(self._fd, len(self._head), 0) != self._head:
            return "rewritten"
        mark = self._mark
        if mark and os.pread(self._fd, len(mark), self.offset - len(mark)) != mark:
            return "rewritten"
        return None

    def _start_over(self, why: str) -> None:
        assert self._fd is not None
        if why == "truncated":
            self.truncations += 1
            self.note(f"{self.path} was truncated; reading it again from its start")
        else:
            self.rewrites += 1
            self.note(
                f"{self.path} was rewritten in place (the bytes read before changed); reading it again from its start"
            )
        os.lseek(self._fd, 0, os.SEEK_SET)
        self.offset, self._head, self._mark = 0, b"", b""

    def _read(self) -> bytes:
        assert self._fd is not None
        block = os.read(self._fd, READ_SIZE)
        if block:
            # A regular file never yields more than its size (an append grows the size first); one that does, read
            # after read, reports a smaller size than it holds, and would be "truncated" and read again forever. Two
            # in a row: a log cut by a writer between our read and the fstat just after it is a microsecond's race,
            # and a log cut twice in a row before we wait (rewritten, then truncated) is no such file.
            if self.offset + len(block) > os.fstat(self._fd).st_size:
                self._past_size += 1
                if self._past_size > 1:
                    raise UsageError(
                        f"{self.path}: reports a size smaller than what it holds (a /proc or /sys file?): "
                        "it cannot be followed"
                    )
            else:
                self._past_size = 0
        if block and len(self._head) < FINGERPRINT and self.offset == len(self._head):
            self._head += block[: FINGERPRINT - len(self._head)]
        self.offset += len(block)
        if block:
            self._mark = block[-FINGERPRINT:] if len(block) >= FINGERPRINT else (self._mark + block)[-FINGERPRINT:]
        return block

    def _replaced(self) -> bool:
        """Is another file at the path now (rotated, or deleted and created again)?"""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:  # deleted, nothing new yet: the old file may still be written through its fd
            return False
        return (st.st_dev, st.st_ino) != self._ident

    # ---- FIFOs ---------------------------------------------------------------------------------------
    async def _readable(self) -> None:
        assert self._fd is not None
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        loop.add_reader(self._fd, ready.set)
        try:
            await ready.wait()
        finally:
            loop.remove_reader(self._fd)

    async def _read_stream(self) -> bytes:
        """The next bytes from the FIFO; b"" when its writer has closed it."""
        while True:
            assert self._fd is not None
            try:
                block = os.read(self._fd, READ_SIZE)
            except BlockingIOError:
                await self._readable()
                continue
            if not block and not self._writer_seen:
                # No writer has opened it yet (a FIFO opened without waiting reads as closed): wait for one.
                await self._readable()
                self._writer_seen = True
                continue
            self._writer_seen = True
            self.offset += len(block)
            return block

    # ---- the stream of lines -------------------------------------------------------------------------
    async def chunks(self) -> AsyncIterator[bytes]:
        """Complete lines, as they arrive, forever (the caller stops iterating)."""
        chunker = LineChunker()
        try:
            while True:
                if self._fd is None:
                    await self._open()
                if self.kind is Kind.STREAM:
                    block = await self._read_stream()
                    if block:
                        for piece in pieces(chunker.push(block)):
                            yield piece
                            await turn()
                        if updates := chunker.updates():  # a progress bar's redraws, as they come
                            yield updates
                        continue
                    # The writer closed the FIFO: its last line is complete. Open it again for the next writer
                    # (a FIFO whose writer is gone reads as closed forever), the new end before the old one is
                    # closed: a next writer may have come, written and gone meanwhile (we paused at the yield),
                    # and the pipe keeps its bytes only while some end of it is open.
                    tail = chunker.flush()
                    if tail:
                        yield tail
                    self.note(f"{self.path}: the writer closed the FIFO; waiting for the next one")
                    old, self._fd = self._fd, None
                    try:
                        await self._open()
                    finally:
                        if old is not None:
                            os.close(old)
                    continue
                got = False
                while True:
                    # Before every read, the time since the last one included a yield: the file may have
                    # been cut or rewritten meanwhile.
                    why = self._changed()
                    if why is not None:
                        tail = chunker.flush()  # the old content's last line, complete as far as it will ever be
                        if tail:
                            yield tail
                        chunker = LineChunker()
                        self._start_over(why)
                    block = self._read()
                    if not block:
                        break
                    got = True
                    for piece in pieces(chunker.push(block)):
                        yield piece
                        await turn()  # a stop signal acts between pieces, however fast the log grows
                    if updates := chunker.updates():  # a progress bar's redraws, as they come
                        yield updates
                if self._replaced():
                    # Rotated or replaced: the old file has been read to its end; its last line is complete.
                    tail = chunker.flush()
                    if tail:
                        yield tail
                    chunker = LineChunker()
                    self._close_fd()
                    self.rotations += 1
                    self.note(f"{self.path} was replaced (rotated?); following the new file from its start")
                    continue
                if not got:
                    if state := chunker.current():  # a progress bar's state while it waits for its next redraw
                        yield state
                    await self._wait()
        finally:
            self._close_fd()
            self.close()


def launch_starts(path: str | os.PathLike[str], marker: Any, keep: int = 2, window: int = 1 << 22) -> list[int]:
    """Line-start offsets of the last `keep` launch markers in the file, earliest first.

    Reads backwards in blocks, so the cost grows with the distance from the end to those markers, not with
    the size of the file. Only a regular file can be read backwards: for anything else (a FIFO, which
    opening would wait on and reading would drain) there are none.
    """
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        return []
    size = st.st_size
    found: set[int] = set()
    with open(path, "rb") as f:
        end = size
        while end > 0 and len(found) < keep:
            begin = max(0, end - window)
            f.seek(begin)
            block = f.read(end - begin + 4096)  # overlap so that a marker cut by the block edge is seen
            for m in marker.finditer(block):
                if begin + m.start() < end:
                    found.add(begin + block.rfind(b"\n", 0, m.start()) + 1)
            end = begin
    return sorted(found)[-keep:]


@dataclasses.dataclass(frozen=True, slots=True)
class BackScan:
    """One backward pass over a file: where its last launch begins, and every line after that a prefilter hit,
    each with the newlines from it to the end (which numbers it once the start's number is known)."""

    start: int
    size: int  # the file's size when it was read: the counts are to there
    newlines: int  # from `start` to the end of the file
    hits: list[tuple[int, int]]  # (offset of the line's start, newlines from there to the end), ascending


_SCAN_THREADS = 2


def _blocks_back(f: Any, size: int, window: int) -> Iterator[tuple[int, bytes]]:
    """The file's whole lines in blocks of about `window` bytes, from its end back: (offset of the block, its
    bytes); (-1, b"") where a block holds no line start (a line longer than the window) or a NUL run."""
    end = size
    while end > 0:
        begin = max(0, end - window)
        f.seek(begin)
        block = f.read(end - begin)
        cut = 0 if begin == 0 else block.find(b"\n") + 1
        seg = block[cut:]
        if (cut == 0 and begin > 0) or (seg.find(b"\x00") >= 0 and b"\x00" * 8 in seg):  # memchr first
            yield -1, b""
            return
        yield begin + cut, seg
        end = begin + cut


def scan_back(
    path: str | os.PathLike[str],
    marker: Any,
    line_starts: Callable[[bytes], list[int]],
    max_hits: int = 100_000,
    window: int = 1 << 20,
    near: int = 256 << 10,
) -> BackScan | None:
    """`last_launch_offset` and a prefilter's hits in one read, from the end back to the launch's start.

    A watch attaching to a server that has served for a day needs both (where the launch began, and what in its
    serving stretch is not a serving number): reading the file once instead of twice is what makes the first
    word come within a second. None where the pass cannot stand for a forward read: not a regular file, a
    byte-order mark (UTF-16: the patterns are UTF-8), NUL runs (a second writer: the forward read splits there),
    a line longer than the window, or more than `max_hits` hits (a log of errors: read it forward)."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        return None
    size = st.st_size
    markers: list[int] = []
    found_back: list[tuple[int, int]] = []  # the hits, last first (the pass goes backwards): reversed once at the end
    after = 0  # newlines from `end` to the end of the file
    with open(path, "rb") as f, ThreadPoolExecutor(max_workers=_SCAN_THREADS) as pool:
        if sniff(f.read(4)) is not None:
            return None
        # RE2 lets go of the GIL: the hits of the next blocks are found on the other cores while this thread counts
        # the newlines of the one before them (which holds it)
        ahead: deque[tuple[int, bytes, Future[list[int]]]] = deque()
        blocks = _blocks_back(f, size, window)
        while True:
            while len(ahead) < _SCAN_THREADS + 1:
                block = next(blocks, None)
                if block is None:
                    break
                ahead.append((*block, pool.submit(line_starts, block[1])))
            if not ahead:
                break
            begin, seg, job = ahead.popleft()
            if begin < 0:  # a line longer than the window, or NUL runs: the pass cannot stand for a forward read
                return None
            found = job.result()
            if len(found_back) + len(found) > max_hits:
                return None
            below, pos = after, len(seg)
            for o in reversed(found):
                below += seg.count(b"\n", o, pos)
                pos = o
                nl = seg.find(b"\n", o)
                if marker.search(seg, o, len(seg) if nl < 0 else nl) is not None and len(markers) < 2:
                    markers.append(begin + o)
                found_back.append((begin + o, below))
            after = below + seg.count(b"\n", 0, pos)
            if markers and (len(markers) == 2 or begin <= markers[0] - near):
                break
        for _, _, job in ahead:
            job.cancel()
    start = 0
    if markers:
        start = markers[1] if len(markers) == 2 and markers[0] - markers[1] < near else markers[0]
    kept = [h for h in reversed(found_back) if h[0] >= start]
    # a marker's line is a hit: its count is the launch's; with no marker the pass went back to the top
    newlines = kept[0][1] if kept and kept[0][0] == start else after
    return BackScan(start, size, newlines, kept)


def last_launch_offset(path: str | os.PathLike[str], marker: Any) -> int:
    """Byte offset where the last launch in the file starts (0 if none is marked). Two markers close together
    (vLLM's banner and its engine line) belong to one launch: the earlier one is taken."""
    starts = launch_starts(path, marker, keep=2)
    if not starts:
        return 0
    if len(starts) == 2 and starts[1] - starts[0] < (256 << 10):
        return starts[0]
    return starts[-1]
