"""What `watch` and `report` do with the file they are given: a log that is rotated, truncated, rewritten
past its old size or not there yet; a FIFO; a /proc file; a device. The follower is driven in-process on
real files; the exit codes and messages are checked on the real command line."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bootwatch.errors import UsageError
from bootwatch.sources import file as file_source
from bootwatch.sources.file import FileFollower

from .conftest import CORPUS

BOOTWATCH = [sys.executable, "-m", "bootwatch"]
READY_VLLM = CORPUS / "vllm/v0.11-elloraa-gloo-ready.log"
FAILED_SGLANG = CORPUS / "sglang/rocm-rdna4-tp2-oom-during-weight-load-one-rank.log"
WAIT_S = 15.0  # a bound for things that take milliseconds; only reached when something is broken


class Reader:
    """A follower and its line stream, read with a bound."""

    def __init__(self, path: Path, start: int = 0) -> None:
        self.notes: list[str] = []
        self.follower = FileFollower(path, start=start, poll_s=0.2, note=self.notes.append)
        self.chunks: AsyncIterator[bytes] = self.follower.chunks()
        self.pending: list[bytes] = []

    async def lines(self, n: int) -> list[bytes]:
        async def fill() -> None:
            while len(self.pending) < n:
                self.pending += (await anext(self.chunks)).splitlines()

        await asyncio.wait_for(fill(), WAIT_S)
        out, self.pending = self.pending[:n], self.pending[n:]
        return out

    async def nothing_more(self, wait_s: float = 0.5) -> None:
        """No line arrives within `wait_s` (what was read is all there is)."""
        task = asyncio.ensure_future(anext(self.chunks))
        done, _ = await asyncio.wait({task}, timeout=wait_s)
        assert not done and not self.pending, task.result() if done else self.pending
        task.cancel()
        # A cancelled __anext__ finishes the generator: a new one would start the file again.
        self.chunks = self.follower.chunks()

    async def close(self) -> None:
        await self.chunks.aclose()
        self.follower.close()


def numbered(prefix: str, n: int) -> bytes:
    return b"".join(f"{prefix} line {i}\n".encode() for i in range(1, n + 1))


async def test_rotation_reads_the_old_file_to_its_end_then_the_new_one(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(numbered("old", 2))
    r = Reader(log)
    try:
        assert await r.lines(2) == [b"old line 1", b"old line 2"]
        log.rename(tmp_path / "server.log.1")
        with (tmp_path / "server.log.1").open("ab") as f:  # the writer still has the old file open
            f.write(b"old line 3\n")
        log.write_bytes(numbered("new", 2))
        assert await r.lines(3) == [b"old line 3", b"new line 1", b"new line 2"]
        assert r.follower.rotations == 1 and r.follower.rewrites == 0
        assert any("replaced" in n for n in r.notes), r.notes
    finally:
        await r.close()


async def test_truncation_starts_over_at_the_beginning(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(numbered("before", 5))
    r = Reader(log)
    try:
        assert len(await r.lines(5)) == 5
        with log.open("r+b") as f:  # copytruncate: same inode, cut to zero, written again
            f.truncate(0)
        with log.open("ab") as f:
            f.write(b"after line 1\n")
        assert await r.lines(1) == [b"after line 1"]
        assert r.follower.truncations == 1 and r.follower.rotations == 0
        assert any("truncated" in n for n in r.notes), r.notes
    finally:
        await r.close()


async def test_a_rewrite_larger_than_the_old_file_starts_over_at_the_beginning(tmp_path: Path) -> None:
    # Truncated and written past the old size between two looks: same inode, a size that never went down.
    # Only the changed first bytes tell that the old offset now points into another file's middle.
    log = tmp_path / "server.log"
    log.write_bytes(numbered("first launch", 3))
    r = Reader(log)
    try:
        assert len(await r.lines(3)) == 3
        inode = log.stat().st_ino
        with log.open("r+b") as f:
            f.truncate(0)
            f.write(numbered("second launch", 40))
        assert log.stat().st_ino == inode
        got = await r.lines(40)
        assert got[0] == b"second launch line 1" and got[-1] == b"second launch line 40"
        assert r.follower.rewrites == 1 and r.follower.rotations == 0
        assert any("rewritten" in n for n in r.notes), r.notes
    finally:
        await r.close()


async def test_a_rewrite_with_the_same_head_is_a_continuation(tmp_path: Path) -> None:
    # The same bytes written again and then more: what was read is still true, so nothing is read twice.
    log = tmp_path / "server.log"
    log.write_bytes(numbered("same", 3))
    r = Reader(log)
    try:
        assert len(await r.lines(3)) == 3
        log.write_bytes(numbered("same", 5))
        assert await r.lines(2) == [b"same line 4", b"same line 5"]
        assert r.follower.rewrites == 0 and r.follower.truncations == 0
    finally:
        await r.close()


async def test_a_truncation_right_after_a_rewrite_is_not_taken_for_a_proc_file(tmp_path: Path) -> None:
    # Rewritten, read again from the start, then cut before the follower waits once: a real log, started over
    # twice, not a file that reads past the size it reports (found by the model test).
    log = tmp_path / "server.log"
    log.write_bytes(numbered("first launch", 3))
    r = Reader(log)
    try:
        assert len(await r.lines(3)) == 3
        with log.open("r+b") as f:
            f.truncate(0)
            f.write(numbered("second launch", 5))
        assert await r.lines(5) == numbered("second launch", 5).splitlines()  # the reader is between reads now
        with log.open("r+b") as f:
            f.truncate(0)
            f.write(numbered("third", 1))
        assert await r.lines(1) == [b"third line 1"]
        assert r.follower.rewrites == 1 and r.follower.truncations == 1
    finally:
        await r.close()


async def test_a_file_that_appears_late_is_announced_at_once_and_then_read(tmp_path: Path) -> None:
    log = tmp_path / "later" / "server.log"
    r = Reader(log)
    try:
        first = asyncio.ensure_future(r.lines(2))
        deadline = time.monotonic() + WAIT_S
        while not r.notes and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert r.notes == [f"waiting for {log} to appear"]
        log.parent.mkdir()
        log.write_bytes(numbered("late", 2))
        assert await first == [b"late line 1", b"late line 2"]
        assert r.notes[1:] == [f"{log} appeared; following it"]
    finally:
        await r.close()


def _write_fifo(fifo: Path, data: bytes) -> threading.Thread:
    def write() -> None:
        with fifo.open("wb") as f:  # blocks until the follower opens its end
            f.write(data)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize(
    "gone_before_reopen", [False, True], ids=["next-writer-while-reading", "next-writer-came-and-went"]
)
async def test_a_fifo_is_followed_as_a_stream_across_writers(tmp_path: Path, gone_before_reopen: bool) -> None:
    # gone_before_reopen: the follower saw the first writer close (it is paused at that writer's last line) and a
    # second writer opens, writes and closes before the follower opens the FIFO again. Closing the old end first
    # threw the pipe's buffer away with the second writer's lines (seen once in the full suite under load).
    fifo = tmp_path / "server.fifo"
    os.mkfifo(fifo)
    r = Reader(fifo)
    try:
        first = _write_fifo(fifo, numbered("writer one", 3) + b"no newline at the close")
        assert await r.lines(4) == [
            b"writer one line 1",
            b"writer one line 2",
            b"writer one line 3",
            b"no newline at the close",
        ]
        first.join(WAIT_S)
        second = _write_fifo(fifo, numbered("writer two", 2))  # tail -F: the next writer is read too
        if gone_before_reopen:
            second.join(WAIT_S)
            assert not second.is_alive()  # it wrote and closed while the follower still held its end
        assert await r.lines(2) == [b"writer two line 1", b"writer two line 2"]
        second.join(WAIT_S)
        assert r.follower.offset == len(numbered("writer one", 3)) + 23 + len(numbered("writer two", 2))
    finally:
        await r.close()


async def test_a_proc_file_is_refused_not_spun_on(tmp_path: Path) -> None:
    r = Reader(Path("/proc/version"))
    with pytest.raises(UsageError, match="cannot be followed"):
        await r.lines(1)


async def test_a_file_larger_than_its_size_is_refused_without_mountinfo(monkeypatch: pytest.MonkeyPatch) -> None:
    # Where /proc/self/mountinfo cannot tell the filesystem, the follower still sees a file that keeps
    # reading past the size it reports, and stops instead of starting over forever.
    monkeypatch.setattr(file_source, "pseudo_fs", lambda st_dev: None)
    r = Reader(Path("/proc/version"))
    with pytest.raises(UsageError, match="reports a size smaller than what it holds"):
        await r.lines(100)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
async def test_a_device_is_refused(device: str) -> None:
    r = Reader(Path(device))
    with pytest.raises(UsageError, match="character device"):
        await r.lines(1)


# ---- the command line ------------------------------------------------------------------------------
def bw(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BOOTWATCH, *args], capture_output=True, text=True, timeout=timeout)


def assert_refused(p: subprocess.CompletedProcess[str], *words: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout[-500:], p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    for w in words:
        assert w in lines[0], lines[0]


def events_of(stdout: str) -> list[dict]:
    return [json.loads(x) for x in stdout.splitlines() if x.startswith("{")]


def test_watch_refuses_proc_files_and_devices() -> None:
    assert_refused(bw("watch", "/proc/version", "--timeout", "20s"), "/proc/version", "cannot be followed")
    assert_refused(bw("watch", "/dev/zero", "--timeout", "20s"), "/dev/zero", "character device")
    assert_refused(bw("watch", "/dev/urandom", "--timeout", "20s"), "character device")


def test_report_reads_a_proc_file_once_and_refuses_a_device() -> None:
    p = bw("report", "/proc/version", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["lines"] >= 1
    assert_refused(bw("report", "/dev/zero"), "/dev/zero", "character device")


def test_report_reads_a_fifo_to_its_writers_close(tmp_path: Path) -> None:
    fifo = tmp_path / "server.fifo"
    os.mkfifo(fifo)
    writer = _write_fifo(fifo, READY_VLLM.read_bytes())
    p = bw("report", str(fifo), "--json")
    writer.join(WAIT_S)
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert s["verdict"] == "ready"
    assert s["lines"] == READY_VLLM.read_bytes().count(b"\n")


def test_watch_follows_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "server.fifo"
    os.mkfifo(fifo)
    watcher = subprocess.Popen(
        [*BOOTWATCH, "watch", str(fifo), "--json", "--timeout", "30s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        writer = _write_fifo(fifo, READY_VLLM.read_bytes())
        out, err = watcher.communicate(timeout=60)
        writer.join(WAIT_S)
    finally:
        watcher.kill()
    assert watcher.returncode == 0, err
    assert events_of(out)[-1]["verdict"] == "ready"


def test_watch_says_at_once_that_it_waits_for_a_missing_file(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    watcher = subprocess.Popen(
        [*BOOTWATCH, "watch", str(log), "--json", "--timeout", "30s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watcher.stdout is not None
        first = json.loads(watcher.stdout.readline())  # long before the 30 s timeout
        assert first["kind"] == "bootwatch" and first["text"] == f"waiting for {log} to appear", first
        log.write_bytes(READY_VLLM.read_bytes())
        out, err = watcher.communicate(timeout=60)
    finally:
        watcher.kill()
    assert watcher.returncode == 0, err
    events = events_of(out)
    assert events[0]["text"] == f"{log} appeared; following it"
    assert events[-1]["verdict"] == "ready"


def test_watch_sees_the_new_launch_in_a_log_rewritten_past_its_old_size(tmp_path: Path) -> None:
    # The first launch is midway (no ready, no failure); the log is then truncated and rewritten with a
    # launch that fails, longer than the first. Resuming at the old offset would miss its start.
    log = tmp_path / "server.log"
    first = b"".join(READY_VLLM.read_bytes().splitlines(keepends=True)[:30])
    second = FAILED_SGLANG.read_bytes()
    assert len(second) > len(first)
    log.write_bytes(first)
    watcher = subprocess.Popen(
        [*BOOTWATCH, "watch", str(log), "--json", "--timeout", "40s", "--stall", "30s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.5)  # let it catch up and follow; it also works if it sees the truncation on its way
        with log.open("r+b") as f:
            f.truncate(0)
            f.write(second)
        out, err = watcher.communicate(timeout=60)
    finally:
        watcher.kill()
    s = events_of(out)[-1]
    assert watcher.returncode == 1, (watcher.returncode, s, err)
    assert (s["verdict"], s["engine"]) == ("failed", "sglang")


async def test_a_symlink_to_a_log_in_another_directory_is_followed_by_file_events(tmp_path: Path) -> None:
    # The writes happen in the target's directory; the link's directory hears nothing of them. With the poll
    # turned off (an hour), only an inotify watch on the target's directory brings the appended lines.
    (tmp_path / "real").mkdir()
    (tmp_path / "links").mkdir()
    (tmp_path / "third").mkdir()
    target, other = tmp_path / "real" / "server.log", tmp_path / "third" / "next.log"
    target.write_bytes(numbered("first", 1))
    link = tmp_path / "links" / "link.log"
    link.symlink_to(target)
    follower = FileFollower(link, poll_s=3600.0)
    chunks = follower.chunks()
    try:
        assert await asyncio.wait_for(anext(chunks), WAIT_S) == b"first line 1\n"
        pending = asyncio.ensure_future(anext(chunks))
        await asyncio.sleep(0.2)  # the follower waits on its watch now
        with target.open("ab") as f:
            f.write(b"appended through the target\n")
        assert await asyncio.wait_for(pending, WAIT_S) == b"appended through the target\n"
        # The link now points into a third directory: the follower re-resolves it and watches there too.
        other.write_bytes(numbered("next", 1))
        tmp = link.with_name("tmp.link")
        tmp.symlink_to(other)
        os.replace(tmp, link)
        assert await asyncio.wait_for(anext(chunks), WAIT_S) == b"next line 1\n"
        pending = asyncio.ensure_future(anext(chunks))
        await asyncio.sleep(0.2)
        with other.open("ab") as f:
            f.write(b"appended to the new target\n")
        assert await asyncio.wait_for(pending, WAIT_S) == b"appended to the new target\n"
    finally:
        await chunks.aclose()
        follower.close()
