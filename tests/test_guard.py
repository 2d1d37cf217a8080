"""The guard (bootwatch/guard.py) runs isolated from the current directory, and a guard that does not come up
keeps bootwatch from starting a server it could not stop if it were killed."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bootwatch import cli, guard
from bootwatch.errors import UsageError
from bootwatch.guard import Guard, GuardNotUp


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_the_guard_runs_no_code_from_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    planted = tmp_path / "bootwatch"
    planted.mkdir()
    (planted / "__init__.py").write_text("")
    (planted / "guard.py").write_text(f"open({str(tmp_path / 'PWNED')!r}, 'w').write('ran')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    g = Guard(grace_s=1.0)
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        g.watch(victim.pid)
        time.sleep(0.3)
        assert not (tmp_path / "PWNED").exists(), "the guard ran ./bootwatch/guard.py"
        g._abandon_pipe_only()  # what bootwatch's death looks like to the guard: the pipe closes, no release
        assert _gone_within(victim.pid, 5.0), "the guard did not stop the group (no guard was running)"
    finally:
        victim.kill()
        victim.wait()
        if g.proc is not None:
            g.proc.wait(timeout=5)


def test_a_guard_that_does_not_come_up_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard, "guard_argv", lambda grace_s: [sys.executable, "-c", "pass"])
    with pytest.raises(GuardNotUp, match="did not come up") as info:
        Guard()
    assert isinstance(info.value, UsageError)


def test_run_without_a_guard_starts_no_server_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(guard, "guard_argv", lambda grace_s: [sys.executable, "-c", "import sys; sys.exit(1)"])
    marker = tmp_path / "started"
    code = cli.main(["run", "--log", str(tmp_path / "s.log"), "--", "touch", str(marker)])
    assert code == 2
    assert "guard" in capsys.readouterr().err
    time.sleep(0.2)
    assert not marker.exists(), "the server was started without a guard"
