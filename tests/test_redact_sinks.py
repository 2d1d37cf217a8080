"""Every secret form of tests/fixtures/secrets.txt (one table, >= 60 forms) is masked at every edge where text
leaves bootwatch: the terminal (report, plain lines), JSON, the probe's state file, the history store (its
rows, `history --json`, `history --html`), the HTML report, the Prometheus labels and error messages."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from bootwatch import cli
from bootwatch.tracker import FactEvent, FailedEvent  # first: the sinks import the tracker's package

from bootwatch.probe_state import StateSink  # isort: skip
from bootwatch.sinks.events import PlainSink  # isort: skip
from bootwatch.sinks.metrics import MetricsSink  # isort: skip

from .test_redact import MARK, SECRETS

BANNER = "INFO 11-18 17:10:46 api_server.py:585] vLLM API server version 0.6.4.post1\n"


def test_the_table_has_sixty_forms_or_more() -> None:
    assert len(SECRETS) >= 60


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BOOTWATCH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _log(tmp_path: Path, line: str) -> Path:
    log = tmp_path / "server.log"
    log.write_text(
        BANNER + f'Traceback (most recent call last):\n  File "serve.py", line 1, in <module>\nRuntimeError: {line}\n',
        encoding="utf-8",
    )
    return log


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    cli.main(list(argv))
    out = capsys.readouterr()
    return out.out + out.err


@pytest.mark.parametrize(("line", "want"), SECRETS, ids=[f"line{i}" for i in range(len(SECRETS))])
def test_each_secret_form_is_masked_in_every_sink(
    tmp_path: Path,
    home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    line: str,
    want: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    log = _log(tmp_path, line)
    outputs: dict[str, str] = {}
    outputs["report"] = _cli(capsys, "report", str(log))
    outputs["report --json"] = _cli(capsys, "report", "--json", str(log))
    summary = json.loads(outputs["report --json"].splitlines()[-1])
    assert summary["failure"]["text"].startswith("RuntimeError: "), summary  # the line is what is shown
    _cli(capsys, "report", "--html", str(tmp_path / "r.html"), str(log))
    outputs["report --html"] = (tmp_path / "r.html").read_text("utf-8")

    raw = {**summary, "failure": {**summary["failure"], "text": line, "context": [line]}, "facts": {"model": line}}
    failed = FailedEvent(t=0.0, line_no=3, text=line, category="config", context=[line], runtime=False)

    plain = tmp_path / "plain.txt"
    with plain.open("w", encoding="utf-8") as f:
        sink = PlainSink(f, str(log))
        sink.event(failed, 0.0)
        sink.close(raw, 1.0)
    outputs["plain lines"] = plain.read_text("utf-8")

    state = StateSink(tmp_path / "state.json", str(log), heartbeat_s=3600)
    state.event(failed, 0.0)
    state.close(raw, 1.0)
    outputs["state file"] = (tmp_path / "state.json").read_text("utf-8")

    metrics = MetricsSink(CollectorRegistry())
    metrics.event(FactEvent(t=0.0, name="model", value=line), 0.0)
    metrics.close(raw, 1.0)
    outputs["metrics"] = generate_latest(metrics.registry).decode()

    from bootwatch.sinks import history

    history.record(raw, f"{log} {line}", "run")
    outputs["history"] = _cli(capsys, "history")
    outputs["history --json"] = _cli(capsys, "history", "--json")
    _cli(capsys, "history", "--html", str(tmp_path / "h.html"))
    outputs["history --html"] = (tmp_path / "h.html").read_text("utf-8")
    db = sqlite3.connect(home / "history.sqlite3")
    outputs["history rows"] = "\n".join(db.iterdump())
    db.close()

    # an argument echoed in an error message (a relative path that is not there)
    outputs["error message"] = _cli(capsys, "report", line)

    leaked = [where for where, text in outputs.items() if MARK in text]
    assert not leaked, f"{line!r} leaks into {leaked}"
    assert "***" in outputs["report --json"] and "***" in outputs["metrics"]


def test_the_html_shows_control_and_bidi_characters_as_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(tmp_path, "weights at /m/\u202egnp.exe\x1b[2J\x07 missing")
    _cli(capsys, "report", "--html", str(tmp_path / "r.html"), str(log))
    page = (tmp_path / "r.html").read_text("utf-8")
    assert "\u202e" not in page and "\x1b" not in page and "\x07" not in page
    assert "\\u202e" in page and "\\x07" in page


def test_an_ssh_url_with_a_password_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["watch", "ssh://admin:S3CR3Tpw@127.0.0.1:2222/var/log/x.log"]) == 2
    err = capsys.readouterr().err
    assert "password" in err and MARK not in err
