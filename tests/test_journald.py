"""journald://UNIT, against the real systemd-journald (in a journal namespace of the test's own, so the
machine's journal is not touched) and the system journalctl: the unit is a cgroup the test makes, whose
process writes on journald's stream socket as a service's stdout does. Where that cannot be done (no root,
no systemd-journald binary, no writable cgroup v2), the real tests skip and say why."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bootwatch.errors import UsageError
from bootwatch.pipeline import analyze_path
from bootwatch.sources.journald import JournaldSpec, death_of, entry_line, journalctl_argv, parse_spec
from bootwatch.sources.registry import parse_source

ROOT = Path(__file__).resolve().parent
CORPUS = ROOT / "corpus"
HELPERS = ROOT / "helpers"
BOOTWATCH = [sys.executable, "-m", "bootwatch"]
READY_VLLM = CORPUS / "vllm/v0.11-elloraa-gloo-ready.log"
FAILED_SGLANG = CORPUS / "sglang/2025-06-fa3-sm120-failed.log"
JOURNALD = Path("/lib/systemd/systemd-journald")
CGROUP2 = Path("/sys/fs/cgroup/unified")
if not CGROUP2.is_dir():
    CGROUP2 = Path("/sys/fs/cgroup")


# ---- the spec and the entry format, without journald ---------------------------------------------------
def test_journald_specs() -> None:
    spec = parse_source("journald://vllm")
    assert isinstance(spec, JournaldSpec) and spec.kind == "journald"
    assert spec.unit == "vllm.service" and spec.journal_namespace is None and spec.label == "vllm.service"
    spec = parse_source("journald://llm/sglang@0.service")
    assert isinstance(spec, JournaldSpec) and spec.unit == "sglang@0.service" and spec.journal_namespace == "llm"
    for bad in ("journald://", "journald://a/b/c", "journald://has space"):
        with pytest.raises(UsageError, match="expected journald://"):
            parse_spec(bad)


def test_journalctl_command_line_resumes_after_the_cursor() -> None:
    spec = parse_spec("journald://ns/vllm")
    assert isinstance(spec, JournaldSpec)
    first = journalctl_argv(spec, None, every_boot=False)
    assert "--unit=vllm.service" in first and "--output=json" in first and "--namespace=ns" in first
    assert "--boot" in first and "--lines=all" in first
    again = journalctl_argv(spec, "s=abc", every_boot=False)
    assert "--after-cursor=s=abc" in again and "--lines=all" not in again


def test_an_entry_keeps_its_time_and_bytes() -> None:
    # journalctl -o json: MESSAGE as a string, or as byte values when it is not clean UTF-8.
    line = entry_line({"__REALTIME_TIMESTAMP": "1796168460187618", "MESSAGE": "INFO 12-01 loading"})
    assert line == b"2026-12-01T23:41:00.187618Z INFO 12-01 loading\n"
    raw = entry_line({"__REALTIME_TIMESTAMP": "1796168460187618", "MESSAGE": [0xFF, 0x41, 0x0A, 0x42]})
    assert raw == b"2026-12-01T23:41:00.187618Z \xffA\n2026-12-01T23:41:00.187618Z B\n"


def test_systemds_exit_entry_is_the_death() -> None:
    # systemd's wording, src/core/service.c: "Main process exited, code=%s, status=%i/%s".
    exited = {"UNIT": "vllm.service", "MESSAGE": "vllm.service: Main process exited, code=exited, status=1/FAILURE"}
    d = death_of(exited, "vllm.service")
    assert d is not None and d.code == 1 and d.signal is None and "status=1/FAILURE" in d.reason
    killed = {"UNIT": "vllm.service", "MESSAGE": "vllm.service: Main process exited, code=killed, status=9/KILL"}
    d = death_of(killed, "vllm.service")
    assert d is not None and d.code is None and d.signal == 9
    assert death_of({**exited, "UNIT": "other.service"}, "vllm.service") is None
    assert death_of({"MESSAGE": exited["MESSAGE"]}, "vllm.service") is None  # the server printing it


# ---- the real journald -------------------------------------------------------------------------------------
def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "journald's namespaces and a unit's cgroup need root"
    if not JOURNALD.exists() or shutil.which("journalctl") is None:
        return "no systemd-journald/journalctl here"
    if not os.access(CGROUP2 / "cgroup.procs", os.W_OK):
        return f"{CGROUP2} is not a writable cgroup v2 hierarchy"
    return None


@dataclass
class Journal:
    namespace: str
    unit: str
    cgroup: Path

    @property
    def run_dir(self) -> Path:
        return Path(f"/run/systemd/journal.{self.namespace}")

    def run_as_unit(self, *command: str) -> subprocess.Popen[bytes]:
        helper = [sys.executable, str(HELPERS / "journal_unit.py"), str(self.cgroup), str(self.run_dir / "stdout")]
        return subprocess.Popen([*helper, "server", "--", *command])

    def systemd_says(self, message: str) -> None:
        """An entry as PID 1 writes it about the unit (UNIT=, _PID=1: what `journalctl -u` matches): a root
        sender may give journald any pid in its credentials."""
        payload = f"MESSAGE={message}\nUNIT={self.unit}\nSYSLOG_IDENTIFIER=systemd\nPRIORITY=5\n".encode()
        creds = struct.pack("3i", 1, 0, 0)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendmsg([payload], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)], 0, str(self.run_dir / "socket"))


@pytest.fixture
def journal() -> Iterator[Journal]:
    why = _why_not()
    if why:
        pytest.skip(why)
    tag = uuid.uuid4().hex[:8]
    j = Journal(f"bwtest{tag}", f"bwtest-{tag}.service", CGROUP2 / f"bwtest-{tag}.slice" / f"bwtest-{tag}.service")
    daemon = subprocess.Popen([str(JOURNALD), j.namespace], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not (j.run_dir / "stdout").exists():
            assert daemon.poll() is None and time.monotonic() < deadline, "systemd-journald did not start"
            time.sleep(0.05)
        j.cgroup.mkdir(parents=True)
        yield j
    finally:
        daemon.terminate()
        daemon.wait(timeout=20)
        for d in (j.cgroup, j.cgroup.parent):
            if d.exists():
                d.rmdir()
        machine = Path("/etc/machine-id").read_text().strip()
        for d in (
            j.run_dir,
            Path(f"/var/log/journal/{machine}.{j.namespace}"),
            Path(f"/run/log/journal/{machine}.{j.namespace}"),
        ):
            shutil.rmtree(d, ignore_errors=True)


def _events(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.fixture
def watchers() -> Iterator[list[subprocess.Popen[str]]]:
    """The watches a test started: a failed test must not leave one running."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait()


def _watch(journal: Journal, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*BOOTWATCH, "watch", f"journald://{journal.namespace}/{journal.unit}", "--json", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_watch_a_unit_through_the_real_journald(journal: Journal, watchers: list[subprocess.Popen[str]]) -> None:
    watcher = _watch(journal, "--timeout", "60")
    watchers.append(watcher)
    time.sleep(1.0)
    server = journal.run_as_unit(sys.executable, str(HELPERS / "fake_server.py"), str(READY_VLLM), "--scale", "0")
    out, err = watcher.communicate(timeout=90)
    server.wait(timeout=30)
    assert watcher.returncode == 0, err
    events = _events(out)
    summary = events[-1]
    assert summary["event"] == "summary" and summary["verdict"] == "ready" and summary["engine"] == "vllm"
    # Every line came, in order, and the journal's stamp was peeled (the engine's own prefix is seen): the
    # ready line is the one `report` finds in the file itself.
    assert summary["ready"] == analyze_path(READY_VLLM)["ready"]
    assert summary["facts"]["engine_version"] == "0.11.0"
    assert any(e["event"] == "phase" and e["name"] == "load_weights" for e in events)


def test_a_unit_whose_main_process_exits_is_a_death(journal: Journal, watchers: list[subprocess.Popen[str]]) -> None:
    watcher = _watch(journal, "--timeout", "60", "--stall", "60")
    watchers.append(watcher)
    time.sleep(1.0)
    # The start of a launch, then systemd's word that the main process exited: no line of the server says why.
    lines = READY_VLLM.read_bytes().splitlines()[:20]
    server = journal.run_as_unit(
        sys.executable, "-c", f"import sys; sys.stdout.buffer.write({b''.join(x + b'{chr(10)}' for x in lines)!r})"
    )
    server.wait(timeout=30)
    time.sleep(0.5)
    journal.systemd_says(f"{journal.unit}: Main process exited, code=killed, status=9/KILL")
    out, err = watcher.communicate(timeout=60)
    summary = _events(out)[-1]
    assert watcher.returncode == 1, err
    assert summary["verdict"] == "failed"
    assert summary["exit"]["signal"] == 9, summary["exit"]
