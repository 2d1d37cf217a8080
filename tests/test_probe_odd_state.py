"""`bootwatch probe` on odd state files (red-team-3 N24): an empty file is "not written yet" (exit 0, as an
absent one), JSON that is no object is a clear exit 2, a heartbeat that is NaN or in the future is stale, and
`server_pid: -1` is no pid (kill(-1, 0) asks about every process)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

from bootwatch import cli
from bootwatch.probe import probe


def _state(path: Path, **over: object) -> Path:
    now = time.time()
    d = {"pid": 1, "started": now, "source": "s.log", "state": "ready", "phase": "ready", "heartbeat": now}
    d.update(over)
    path.write_text(json.dumps(d))
    return path


def test_an_empty_state_file_is_not_written_yet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.json").write_text("")
    assert cli.main(["probe", "--state", str(tmp_path / "s.json")]) == 0
    assert "not written yet" in capsys.readouterr().out


@pytest.mark.parametrize("text", ["[]", "42", "null"])
def test_json_that_is_no_state_is_a_clear_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    (tmp_path / "s.json").write_text(text)
    assert cli.main(["probe", "--state", str(tmp_path / "s.json")]) == 2
    err = capsys.readouterr().err
    assert "not a bootwatch state" in err and "internal error" not in err


@pytest.mark.parametrize("heartbeat", [time.time() + 3600, math.nan], ids=["future", "nan"])
def test_a_heartbeat_in_the_future_or_nan_is_stale(tmp_path: Path, heartbeat: float) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"pid": 1, "started": 0, "source": "s.log", "state": "ready", "heartbeat": heartbeat}))
    assert probe(path, None, None).status == "unknown"


def test_server_pid_minus_one_is_no_pid(tmp_path: Path) -> None:
    path = _state(tmp_path / "s.json", server_pid=-1)
    assert probe(path, None, None).status == "ready"
