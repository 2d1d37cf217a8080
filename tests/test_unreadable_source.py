"""A SOURCE that exists but cannot be read (another user's 0600 log): every command says so in one line and
exits 2, as `report` always did; none of them an internal error."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BOOTWATCH = [sys.executable, "-m", "bootwatch"]


def _as_a_reader_who_may_not(argv: list[str]) -> list[str]:
    """`argv` run by someone the file's mode keeps out. As root, that is root without the capabilities that
    read past a file's mode (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so the checkout stays readable."""
    if os.geteuid() != 0:
        return argv
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: nothing here can be refused a file")
    drop = "-dac_override,-dac_read_search"
    return ["setpriv", "--bounding-set", drop, "--inh-caps", drop, *argv]


@pytest.mark.parametrize(
    "command",
    [["watch"], ["watch", "--follow"], ["watch", "--json"], ["report"], ["replay", "--speed", "0"]],
)
def test_an_unreadable_source_is_one_line_and_exit_2(tmp_path: Path, command: list[str]) -> None:
    log = tmp_path / "secret.log"
    log.write_text("INFO 11-18 17:10:46 api_server.py:585] vLLM API server version 0.6.4.post1\n")
    log.chmod(0o600)
    if os.geteuid() == 0:
        os.chown(log, 65534, 65534)  # nobody's: root without DAC capabilities is kept out like anyone else
    else:
        log.chmod(0)
    limit = ["--timeout", "5s"] if command[0] == "watch" else []  # should it wait for the file after all
    p = subprocess.run(
        _as_a_reader_who_may_not([*BOOTWATCH, *command, *limit, str(log)]),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BOOTWATCH_HOME": str(tmp_path / "home")},
    )
    assert p.returncode == 2, p
    assert p.stderr.strip() == f"bootwatch: {log}: cannot open: Permission denied", p.stderr  # was internal error
