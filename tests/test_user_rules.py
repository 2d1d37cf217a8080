"""User rule files (`--rules`): matched by RE2, the engine that checks them, and refused with one line and exit 2
when they are not rule files at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bootwatch.engines.rules import MAX_RULE_FILE
from bootwatch.pipeline import analyze_path

BOOTWATCH = [sys.executable, "-m", "bootwatch"]

# Ready by the user's own rules: an engine bootwatch has never heard of.
MY_RULES = """\
engine = "myserver"

[[detect]]
pattern = '^myserver v\\d+ starting'

[[launch]]
pattern = '^myserver v\\d+ starting'

[[phase]]
name = "load_weights"
pattern = '^loading weights from (?P<path>\\S+)'

[[ready]]
pattern = '^myserver listening on port \\d+'
"""
MY_LOG = "myserver v2 starting\nloading weights from /m/x\nmyserver listening on port 8000\n"


def bw(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BOOTWATCH, *args], capture_output=True, text=True, timeout=timeout)


def assert_refused(p: subprocess.CompletedProcess[str], *words: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_a_catastrophic_user_pattern_is_matched_in_linear_time(tmp_path: Path) -> None:
    # `(a+)+b` backtracks exponentially in Python's `re` (35 s for 29 characters); in RE2 it is linear. The
    # rules are a category (run on a failure's text) and a benign one (run on every fatal candidate), so
    # the pattern meets the line whatever the prefilter lets through.
    rules = tmp_path / "slow.toml"
    rules.write_text(
        'engine = "unknown"\n[[category]]\nname = "slow"\npattern = "(a+)+b|q"\n[[benign]]\npattern = "(a+)+b|q"\n'
    )
    log = tmp_path / "server.log"
    log.write_text(
        f'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nRuntimeError: {"a" * 29}\n'
    )
    t0 = time.perf_counter()
    s = analyze_path(log, rules=[rules])
    elapsed = time.perf_counter() - t0
    assert s["verdict"] == "failed"
    assert elapsed < 2.0, f"report took {elapsed:.1f} s: the pattern backtracks"


def test_a_user_rule_file_adds_an_engine(tmp_path: Path) -> None:
    rules = tmp_path / "my.toml"
    rules.write_text(MY_RULES)
    log = tmp_path / "server.log"
    log.write_text(MY_LOG)
    p = bw("report", str(log), "--rules", str(rules), "--json")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert (s["verdict"], s["engine"]) == ("ready", "myserver")
    assert "load_weights" in [ph["name"] for ph in s["phases"]]


def test_a_user_file_for_a_known_engine_keeps_what_it_does_not_say(tmp_path: Path) -> None:
    """Extra vLLM rules without `display` or `health`: the engine is still "vLLM", its health path /health."""
    from bootwatch.engines.rules import load_rulebook

    rules = tmp_path / "more-vllm.toml"
    rules.write_text('engine = "vllm"\n[[warning]]\nname = "mine"\npattern = "^my own warning"\n')
    er = load_rulebook([rules]).for_engine("vllm")
    builtin = load_rulebook().for_engine("vllm")
    assert (er.display, er.health, er.runs, er.formats) == (
        builtin.display,
        builtin.health,
        builtin.runs,
        builtin.formats,
    )
    assert er.display == "vLLM" and any(r.name == "mine" for r in er["warning"])


BAD_FILES = {
    "not-toml": ("engine = myserver\n[[ready]\n", "not valid TOML"),
    "unknown-key": ('engine = "x"\n[[ready]]\npattern = "up"\nwhen = "now"\n', "unknown keys ['when']"),
    "unknown-kind": ('engine = "x"\n[[redy]]\npattern = "up"\n', "unknown top-level keys ['redy']"),
    "look-ahead": ('engine = "x"\n[[ready]]\npattern = "up(?=now)"\n', "bad pattern"),
    "unbalanced": ('engine = "x"\n[[ready]]\npattern = "(up"\n', "missing )"),
    "weight-text": ('engine = "x"\n[[detect]]\npattern = "x"\nweight = "heavy"\n', "`weight` must be"),
    "pattern-number": ('engine = "x"\n[[ready]]\npattern = 5\n', "`pattern` must be a string"),
    "levels-text": ('engine = "x"\n[[fatal]]\npattern = "x"\nrole = "cause"\nlevels = "ERROR"\n', "`levels`"),
    "extends-text": ('engine = "x"\nextends = "python"\n', "`extends` must be an array of strings"),
    "empty-pattern": ('engine = "x"\n[[fatal]]\npattern = ""\nrole = "cause"\n', "pattern is empty"),
    "no-engine": ('[[ready]]\npattern = "up"\n', "engine"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_a_bad_rule_file_is_one_line_and_exit_2(tmp_path: Path, name: str) -> None:
    text, words = BAD_FILES[name]
    rules = tmp_path / f"{name}.toml"
    rules.write_text(text)
    log = tmp_path / "server.log"
    log.write_text(MY_LOG)
    assert_refused(bw("report", str(log), "--rules", str(rules)), str(rules), words)


def test_rule_files_must_be_small_regular_utf8_files(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(MY_LOG)
    assert_refused(bw("report", str(log), "--rules", "/dev/zero"), "/dev/zero", "not a regular file")
    assert_refused(bw("report", str(log), "--rules", str(tmp_path)), "a directory")
    assert_refused(bw("report", str(log), "--rules", str(tmp_path / "nope.toml")), "No such file")
    big = tmp_path / "big.toml"
    big.write_text('engine = "x"\n' + "#" * MAX_RULE_FILE + "\n")
    assert_refused(bw("report", str(log), "--rules", str(big)), "larger than 1 MiB")
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'engine = "caf\xe9"\n')
    assert_refused(bw("report", str(log), "--rules", str(latin)), "not UTF-8")
    # A FIFO with no writer: refused at once, not waited on.
    fifo = tmp_path / "rules.fifo"
    os.mkfifo(fifo)
    assert_refused(bw("report", str(log), "--rules", str(fifo), timeout=20), "not a regular file")


def test_watch_refuses_a_bad_rule_file_before_it_waits(tmp_path: Path) -> None:
    rules = tmp_path / "bad.toml"
    rules.write_text('engine = "x"\n[[ready]]\npattern = "(up"\n')
    p = bw("watch", str(tmp_path / "server.log"), "--rules", str(rules), "--timeout", "20s")
    assert_refused(p, "bad pattern")
