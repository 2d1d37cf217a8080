"""A log's bytes are data: never rich markup, never terminal control, never a leaked secret.

Hostile logs (markup in a model path and the ready line, terminal escapes and C1 controls, API keys and
tokens) go through every command and sink for real; what comes out must be inert and secret-free.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bootwatch.text.safe import printable

from .conftest import CORPUS
from .test_live_view import Pty

BOOTWATCH = [sys.executable, "-m", "bootwatch"]
MARK = "S3CR3T"  # every fake secret holds it
# What a log may try on a terminal: a full reset, the line-drawing charset, cursor save/restore, an OSC 52
# clipboard write in its 8-bit C1 form (UTF-8 encoded, and as raw bytes), BEL, backspace. (A carriage return
# is the normaliser's: it keeps what follows the last one, as a terminal would show a progress bar.)
ATTACK = "\x1bc\x1b(0\x1b7\x1b8\u009d52;c;aGk=\u009c\x07\x08\x0b\x0c"
ATTACK_BYTES = ATTACK.encode() + b"\x9d52;c;aGk=\x9c"
DANGEROUS = [
    b"\x1bc",
    b"\x1b(0",
    b"\x1b7",
    b"\x1b8",
    "\u009d".encode(),
    "\u009c".encode(),
    b"\x07",
    b"\x08",
    b"\x9d",
    b"\x9c",
]
API_KEY = f"sk-{MARK}abcdefgh0123"
HF_TOKEN = f"hf_{MARK}aBcDeFgHiJkLmNoPqRsTuVwXyZ01"

READY_LOG = (
    "INFO 04-27 15:04:49 [api_server.py:1772] vLLM API server version 0.12.0\n"
    f"INFO 04-27 15:04:49 [utils.py:253] non-default args: {{'model': '/models/[/bold]x{ATTACK}', "
    f"'api_key': '{API_KEY}', 'max_model_len': 4096}}\n"
    f"INFO 04-27 15:04:57 [gpu_model_runner.py:3467] Starting to load model /models/[/bold]x{ATTACK}...\n"
    f"WARNING 04-27 15:05:01 [vllm.py:601] Enforce eager set [/] {ATTACK} --api-key {API_KEY}\n"
    f"INFO:     Application startup complete. [/] [/bold] [bold]{ATTACK}\n"
).encode() + b"\x9d52;c;aGk=\x9c\n"


def failed_log() -> bytes:
    """A real OOM log whose root-cause line also carries markup, terminal escapes and a token."""
    raw = (CORPUS / "sglang/rocm-rdna4-tp2-oom-during-weight-load-one-rank.log").read_bytes()
    junk = f" [/] [/red]{ATTACK} token {HF_TOKEN}".encode()
    return raw.replace(
        b"torch.OutOfMemoryError: CUDA out of memory.", b"torch.OutOfMemoryError: CUDA out of memory." + junk, 1
    )


def plain_env(home: Path) -> dict[str, str]:
    return {**os.environ, "BOOTWATCH_HOME": str(home), "NO_COLOR": "1", "TERM": "dumb"}


def bw(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    p = subprocess.run([*BOOTWATCH, *args], capture_output=True, env=env, timeout=timeout)
    # bootwatch's own crash would show on stderr; the log's text (tracebacks included) may be quoted on stdout.
    assert b"Traceback (most recent call last)" not in p.stderr, p.stderr.decode("utf-8", "replace")[-3000:]
    return p


def assert_inert(out: bytes) -> None:
    """No control character but newline and tab, no DEL, no C1: nothing a terminal would act on."""
    bad = sorted({b for b in out if (b < 0x20 and b not in (0x0A, 0x09)) or b == 0x7F})
    assert not bad, f"control bytes {bad} in: {out[-1500:]!r}"
    c1 = sorted({hex(ord(c)) for c in out.decode("utf-8", "replace") if 0x80 <= ord(c) <= 0x9F})
    assert not c1, f"C1 controls {c1} in: {out[-1500:]!r}"


def assert_clean(out: bytes) -> None:
    assert_inert(out)
    assert MARK.encode() not in out, out.decode("utf-8", "replace")


def json_lines(out: bytes) -> list[dict]:
    return [json.loads(x) for x in out.decode().splitlines() if x.strip()]


@pytest.fixture
def logs(tmp_path: Path) -> dict[str, Path]:
    ready, failed = tmp_path / "ready.log", tmp_path / "failed.log"
    ready.write_bytes(READY_LOG)
    failed.write_bytes(failed_log())
    return {"ready": ready, "failed": failed}


# ---- the escape itself -------------------------------------------------------------------------------
def test_printable_escapes_every_control_but_tab() -> None:
    s = "".join(chr(c) for c in range(0xA0)) + "\u202e\udcff"
    out = printable(s)
    assert all(c == "\t" or 0x20 <= ord(c) < 0x7F or ord(c) >= 0xA0 for c in out), out
    assert "\\x1b" in out and "\\x9d" in out and "\\x07" in out and "\\x7f" in out and "\t" in out
    assert "\\u202e" in out and out.endswith("\\xff")  # a bidi override; an undecodable byte kept as surrogate
    assert printable("plain [bold] text") == "plain [bold] text"


# ---- markup: a `[/]` in a log is text ----------------------------------------------------------------
def test_report_shows_markup_from_the_log_as_text(logs: dict[str, Path], tmp_path: Path) -> None:
    p = bw(plain_env(tmp_path), "report", str(logs["ready"]))
    out = p.stdout.decode()
    assert p.returncode == 0, out
    assert "READY" in out and "Application startup complete. [/] [/bold] [bold]" in out
    assert "/models/[/bold]x" in out
    assert_clean(p.stdout)
    # The escapes are visible, so a person sees what the log held.
    assert "\\x1bc\\x1b(0\\x1b7\\x1b8\\x9d52;c;aGk=\\x9c\\x07\\x08" in out  # (stripped values lose a trailing VT, FF)


def test_report_of_a_failure_shows_its_root_cause_inert_and_redacted(logs: dict[str, Path], tmp_path: Path) -> None:
    p = bw(plain_env(tmp_path), "report", str(logs["failed"]))
    out = p.stdout.decode()
    assert p.returncode == 0 and "FAILED" in out
    assert "torch.OutOfMemoryError: CUDA out of memory. [/] [/red]\\x1bc" in out and "token hf_***" in out
    assert_clean(p.stdout)


def test_report_json_is_redacted_and_escaped(logs: dict[str, Path], tmp_path: Path) -> None:
    for kind in ("ready", "failed"):
        p = bw(plain_env(tmp_path), "report", "--json", str(logs[kind]))
        assert p.returncode == 0
        assert_clean(p.stdout)
        s = json_lines(p.stdout)[-1]
        assert s["verdict"] == kind
        text = (s["ready"] or s["failure"])["text"]
        assert "\x1bc" in text  # JSON keeps the log's text (escaped by JSON itself), only the secrets go


@pytest.mark.parametrize("as_json", [False, True], ids=["plain", "json"])
def test_watch_and_replay_of_hostile_logs(logs: dict[str, Path], tmp_path: Path, as_json: bool) -> None:
    env = plain_env(tmp_path)
    extra = ["--json"] if as_json else []
    for kind, code in (("ready", 0), ("failed", 1)):
        w = bw(env, "watch", str(logs[kind]), "--from-start", "--timeout", "30", *extra)
        r = bw(env, "replay", "--speed", "0", str(logs[kind]), *extra)
        for p in (w, r):
            assert p.returncode == code, p.stdout.decode("utf-8", "replace")[-2000:]
            assert_clean(p.stdout)
            if as_json:
                assert json_lines(p.stdout)[-1]["verdict"] == kind
            else:
                assert ("READY" if kind == "ready" else "FAILED") in p.stdout.decode()


@pytest.mark.parametrize("as_json", [False, True], ids=["plain", "json"])
def test_run_does_not_print_the_api_key_of_the_server_command(
    logs: dict[str, Path], tmp_path: Path, as_json: bool
) -> None:
    # The server's command line carries its key (and an env assignment): `started pid …` must not repeat them.
    server = [
        "env",
        f"OPENAI_API_KEY={MARK}env",
        "sh",
        "-c",
        'cat "$1"',
        "server",
        str(logs["ready"]),
        "--api-key",
        API_KEY,
        f"--hf-token={HF_TOKEN}",
    ]
    p = bw(
        plain_env(tmp_path),
        "run",
        "--log",
        str(tmp_path / "run.log"),
        "--timeout",
        "30",
        *(["--json"] if as_json else []),
        "--",
        *server,
    )
    assert p.returncode == 0, p.stdout.decode("utf-8", "replace")[-2000:]
    assert_clean(p.stdout)
    out = p.stdout.decode()
    assert "--api-key ***" in out and "OPENAI_API_KEY=***" in out


def test_history_of_hostile_startups_is_inert_and_redacted(logs: dict[str, Path], tmp_path: Path) -> None:
    env = plain_env(tmp_path)
    for kind in ("ready", "failed"):
        bw(env, "watch", str(logs[kind]), "--from-start", "--timeout", "30")
    for args in (["history"], ["history", "--json"]):
        p = bw(env, *args)
        assert p.returncode == 0, p.stdout.decode("utf-8", "replace")
        assert_clean(p.stdout)


@pytest.mark.parametrize("kind", ["ready", "failed"])
def test_the_live_view_draws_no_control_from_the_log(logs: dict[str, Path], kind: str) -> None:
    term = Pty(["replay", "--speed", "0", str(logs[kind])])
    try:
        code = term.finish()
    finally:
        term.kill()
    assert code == (0 if kind == "ready" else 1)
    # rich draws with its own CSI sequences; nothing else may reach the terminal.
    raw = term.raw
    # A lone C1 byte is a control to a terminal that is not in UTF-8 mode; the same byte inside a character's
    # UTF-8 encoding (the view's "✓" is E2 9C 93) is not.
    lone = raw.decode("utf-8", "surrogateescape")
    for seq in DANGEROUS:
        if len(seq) == 1 and seq[0] >= 0x80:
            assert chr(0xDC00 + seq[0]) not in lone, (seq, raw[-2000:])
        else:
            assert seq not in raw, (seq, raw[-2000:])
    assert MARK.encode() not in raw
    assert b"\\x1bc" in raw  # shown, escaped


# ---- random bytes ------------------------------------------------------------------------------------
FRAGMENTS = st.sampled_from(
    [
        b"[bold]",
        b"[/]",
        b"[/bold]",
        b"[red]x[/red]",
        b"[link=file:///etc]",
        b"\\",
        b"\x1b",
        b"\x1bc",
        b"\x1b]52;c;aGk=\x07",
        b"\x9d52;c;aGk=\x9c",
        "\u009b2J".encode(),
        b"\x07",
        b"\x08",
        b"\r",
        b"\x00",
        b"\x7f",
        b"\xff\xfe",
        b"\xc3(",
        b"\n",
        b"INFO 04-27 15:04:49 [api_server.py:1772] vLLM API server version 0.12.0\n",
        b"INFO:     Application startup complete.",
        b"torch.OutOfMemoryError: CUDA out of memory.",
        b"Traceback (most recent call last):\n",
        b"RuntimeError: boom [/]\n",
        f"--api-key {API_KEY} ".encode(),
        f" {HF_TOKEN} ".encode(),
        b"\t",
        b" ",
        "\u202e".encode(),
    ]
)
LOGS = st.lists(st.one_of(FRAGMENTS, st.binary(max_size=64), FRAGMENTS.map(lambda b: b * 2000)), max_size=30).map(
    b"".join
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=LOGS)
def test_any_bytes_as_a_log_give_inert_output_and_a_spec_exit_code(data: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="bootwatch-bytes-") as d:
        log = Path(d) / "random.log"
        log.write_bytes(data)
        env = plain_env(Path(d))
        for args, codes in (
            (["report", str(log)], {0, 2}),
            (["report", "--json", str(log)], {0, 2}),
            (["replay", "--speed", "0", str(log)], {0, 1, 2, 3}),
        ):
            p = bw(env, *args)
            assert p.returncode in codes, (args, p.returncode, p.stderr[-2000:])
            assert_inert(p.stdout)
            assert MARK.encode() not in p.stdout, p.stdout[-2000:]
            if p.returncode == 2:
                assert p.stderr.decode("utf-8", "replace").count("\n") == 1, p.stderr  # one clear line
            elif "--json" in args:
                assert json_lines(p.stdout)


def test_no_escape_from_the_log_survives_in_plain_lines_even_unstripped() -> None:
    # The normaliser strips CSI colour codes before the tracker; the escape at the sink must not rely on it.
    assert re.fullmatch(r"[ -~\t]*", printable(ATTACK_BYTES.decode("utf-8", "surrogateescape")))


@pytest.mark.parametrize("as_json", [False, True])
def test_a_500_kb_exception_message_is_shown_capped_with_the_cut_said(tmp_path: Path, as_json: bool) -> None:
    # A server that dies of one enormous exception message: the terminal line, the summary and the JSON each
    # show its start and its end and say how much was cut (the whole line stays in the server's own log).
    from bootwatch.tracker.parts import SHOWN_MAX

    server = (
        'print("INFO 11-18 17:10:46 api_server.py:585] vLLM API server version 0.6.4.post1", flush=True); '
        'raise RuntimeError("x" * 500000 + " the end of the message")'
    )
    p = subprocess.run(
        [*BOOTWATCH, "run", *(["--json"] if as_json else []), "--log", str(tmp_path / "c.log"), "--"]
        + [sys.executable, "-c", server],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "BOOTWATCH_HOME": str(tmp_path / "home"), "NO_COLOR": "1"},
    )
    assert p.returncode == 1, p.stderr
    assert len(p.stdout) < 6 * SHOWN_MAX, len(p.stdout)  # was 1 MB: the message whole, twice
    assert "characters cut ...]" in p.stdout and "the end of the message" in p.stdout
    if as_json:
        failure = json.loads(p.stdout.splitlines()[-1])["failure"]
        assert failure["text"].startswith("RuntimeError: xxx") and len(failure["text"]) <= SHOWN_MAX + 40
        assert failure["text"].endswith("the end of the message")


def test_a_cut_line_never_keeps_half_a_secret() -> None:
    # found by the property above: a 78 KB line of tokens, clipped in the middle of one, showed its rest without
    # the "hf_" that lets redaction know it
    from bootwatch.text.redact import redact
    from bootwatch.tracker.parts import clip

    line = " hf_S3CR3TaBcDeFgHiJkLmNoPqRsTuVwXyZ01 " * 2000
    assert "S3CR3T" not in redact(clip(line))
    one_word = "hf_" + "S3CR3T" * 4000
    assert "S3CR3T" not in redact(clip(one_word)) and "characters cut" in clip(one_word)
    assert clip("short") == "short"
