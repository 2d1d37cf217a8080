from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import hypothesis  # noqa: F401  (imported here, at a shallow stack: CPython 3.11.7's ast can fail on a late import)
import pytest

ROOT = Path(__file__).resolve().parent.parent
# The suite never writes to the user's own history store.
os.environ["BOOTWATCH_HOME"] = tempfile.mkdtemp(prefix="bootwatch-test-home-")
# Every process this test session starts inherits this mark: the orphan check looks only at ours, not at
# another test session's or a benchmark's running on the same machine.
SESSION_MARK = f"{os.getpid()}-{os.urandom(4).hex()}"
os.environ["BOOTWATCH_TEST_SESSION"] = SESSION_MARK
CORPUS = Path(os.environ.get("BOOTWATCH_CORPUS", ROOT / "tests" / "corpus"))
FIXTURES = ROOT / "tests" / "fixtures"
AFTER_READY = ROOT / "tests" / "after_ready"  # real logs that run past ready, labelled with the findings due


def corpus_labels() -> list[Path]:
    labels = sorted(CORPUS.glob("*/*.json"))
    assert labels, f"no labelled logs found in {CORPUS} (set BOOTWATCH_CORPUS)"
    return labels


def corpus_name(label: Path) -> str:
    """A corpus log's name in the known-miss tables: `engine/slug`."""
    return f"{label.parent.name}/{label.stem}"


def corpus_params(known: dict[str, str]) -> list[Any]:
    """Every corpus label as a test parameter; those in `known` (name -> class of miss) expected to fail,
    strictly: a fix fails the suite until its entry leaves the table."""
    return [
        pytest.param(
            p,
            id=corpus_name(p),
            marks=[pytest.mark.xfail(strict=True, reason=known[corpus_name(p)])] if corpus_name(p) in known else [],
        )
        for p in corpus_labels()
    ]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (pyproject's addopts: `-n 3 --dist loadgroup`), the tests against real servers all go
    to one worker, one at a time as before: two vLLM CPU servers at once on 2 cores would only time out, and their
    shared fixtures (one server for a module or the session) are started once."""
    for item in items:
        if item.get_closest_marker("real_server") is not None:
            item.add_marker(pytest.mark.xdist_group("real_servers"))


@pytest.fixture(scope="session")
def corpus() -> Path:
    assert CORPUS.is_dir(), f"corpus not found at {CORPUS} (set BOOTWATCH_CORPUS)"
    return CORPUS


HELPER = ROOT / "tests" / "helpers" / "fake_server.py"


def _strays() -> list:
    import psutil

    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = p.info.get("cmdline") or []
        # The stand-in server itself (python fake_server.py ...), not a bootwatch that names it as an argument.
        if len(cmd) > 1 and cmd[1].endswith("fake_server.py"):
            try:
                if p.environ().get("BOOTWATCH_TEST_SESSION") == SESSION_MARK:
                    out.append(p)
            except psutil.Error:
                continue
    return out


def assert_none_left(find, what: str, grace_s: float = 3.0) -> None:
    """Wait up to `grace_s` for the processes `find()` returns to be gone; kill any left and fail."""
    import time

    import psutil

    deadline = time.time() + grace_s
    left = find()
    while left and time.time() < deadline:
        time.sleep(0.1)
        left = find()
    for p in left:
        with contextlib.suppress(psutil.Error):
            p.kill()
    assert not left, f"{what} left behind: {[p.pid for p in left]}"


@pytest.fixture(autouse=True)
def no_orphans():
    """Every test leaves no stand-in server behind; a stray one fails the test (and is killed)."""
    yield
    assert_none_left(_strays, "stand-in server processes")


def wait_until_open(pid: int, path: Path, timeout: float = 30.0) -> None:
    """Block until process `pid` holds `path` open and has read what it holds: a watcher started just before
    a writer may, on a busy machine, only look after the whole launch is written, and a watch that finds a
    launch already over waits for a new one. Tests that write while a watch follows wait here instead of
    sleeping a guessed while."""
    want = os.path.realpath(path)
    fd_dir = Path(f"/proc/{pid}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            size = os.path.getsize(want)
            for fd in (fd_dir / "fd").iterdir():
                with contextlib.suppress(OSError, ValueError):
                    if os.readlink(fd) != want:
                        continue
                    info = (fd_dir / "fdinfo" / fd.name).read_text()
                    pos = int(next(x for x in info.splitlines() if x.startswith("pos:")).split()[1])
                    if pos >= size:
                        return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} never read {path} to its end within {timeout} s")
