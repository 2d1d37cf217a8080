"""The HTML timeline (`history --html`, `report --html`) rendered by a real headless Chromium: a screenshot
(kept in bench/out/ as the artifact), no console error, nothing fetched, hostile log text inert."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bootwatch.store import Command, StoredPhase, StoredStartup, open_store
from tests.conftest import CORPUS

ROOT = Path(__file__).resolve().parent.parent
BOOTWATCH = [sys.executable, "-m", "bootwatch"]
HOSTILE = "<script>alert(1)</script><img src=http://example.com/x.png> CUDA out of memory"
PNG = b"\x89PNG\r\n\x1a\n"


def chromium() -> str:
    p = subprocess.run(
        ["bash", str(ROOT / "scripts" / "chromium-for-tests")], capture_output=True, text=True, timeout=900
    )
    if p.returncode != 0:
        pytest.skip(f"no headless Chromium: {p.stderr.strip()}")
    return p.stdout.strip().splitlines()[-1]


def screenshot(html: Path, png: Path, tmp: Path) -> str:
    """Render `html` to `png`; returns what Chromium logged (console messages included)."""
    p = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp / 'profile'}",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,720",
            f"--screenshot={png}",
            html.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stderr


def console_errors(log: str) -> list[str]:
    return [
        line
        for line in log.splitlines()
        if "Uncaught" in line or ("CONSOLE" in line and "rror" in line) or "Refused to" in line or "net::ERR" in line
    ]


def _startup(i: int, verdict: str, load_s: float, cause: str | None = None) -> StoredStartup:
    phases = [
        StoredPhase("start", False, 0.0, 4.0),
        StoredPhase("load_weights", False, 4.0, load_s if verdict == "ready" else None),
    ]
    if verdict == "ready":
        phases += [
            StoredPhase("compile", False, 4.0 + load_s, 20.0),
            StoredPhase("cuda_graph", False, 24.0 + load_s, 8.0),
            StoredPhase("ready", False, 32.0 + load_s, None),
        ]
    total = 32.0 + load_s if verdict == "ready" else 4.0 + load_s
    return StoredStartup(
        1_760_000_000.0 + i * 600,
        1_760_000_000.0 + i * 600 + total,
        "gpu-node-1",
        "server.log",
        Command.RUN,
        "vllm",
        verdict,
        "0.11.0",
        "/models/Qwen3-235B-A22B",
        {"tp_size": 8},
        total,
        total if verdict == "ready" else None,
        cause,
        "oom" if cause else None,
        phases=tuple(phases),
    )


def test_history_and_report_timelines_render_in_chromium(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with open_store(home) as store:
        for i, (verdict, load, cause) in enumerate(
            [
                ("ready", 60.0, None),
                ("ready", 66.0, None),
                ("failed", 30.0, "torch.OutOfMemoryError: " + HOSTILE),
                ("ready", 190.0, None),
            ]
        ):
            store.add(_startup(i, verdict, load, cause))
    env = {**os.environ, "BOOTWATCH_HOME": str(home)}
    page = tmp_path / "history.html"
    p = subprocess.run([*BOOTWATCH, "history", "--html", str(page)], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    text = page.read_text()
    # Self-contained and inert: no script, no fetch of anything, the hostile cause escaped.
    for banned in ("<script", "<img", "<link", "<iframe", ' src="', ' href="', "@import", "url("):
        assert banned not in text.lower(), banned
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "FAILED: [oom] torch.OutOfMemoryError" in text
    assert text.count('class="bar"') >= 12 and "load_weights: 3m10s" in text
    report = tmp_path / "report.html"
    log = CORPUS / "sglang/rocm-rdna4-tp2-oom-during-weight-load-one-rank.log"
    p = subprocess.run(
        [*BOOTWATCH, "report", str(log), "--json", "--html", str(report)], capture_output=True, text=True, env=env
    )
    assert p.returncode == 0 and p.stdout.startswith("{"), p.stderr
    assert "torch.OutOfMemoryError: CUDA out of memory" in report.read_text()
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    for name, html in (("history", page), ("report", report)):
        png = tmp_path / f"{name}.png"
        log_text = screenshot(html, png, tmp_path)
        assert console_errors(log_text) == [], console_errors(log_text)
        data = png.read_bytes()
        assert data.startswith(PNG) and len(data) > 20_000  # a blank page is a few kB
        shutil.copy(png, out / f"timeline-{name}.png")


def test_compare_two_startups_and_bad_ids(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with open_store(home) as store:
        a = store.add(_startup(0, "ready", 60.0))
        b = store.add(_startup(1, "ready", 190.0))
    env = {**os.environ, "BOOTWATCH_HOME": str(home)}
    p = subprocess.run([*BOOTWATCH, "history", "--compare", str(a), str(b)], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    row = next(line for line in p.stdout.splitlines() if line.startswith("load_weights"))
    assert "1m00s" in row and "3m10s" in row and "+2m10s (3.17×)" in row
    assert "to ready" in p.stdout
    p = subprocess.run([*BOOTWATCH, "history", "--compare", str(a), "999"], capture_output=True, text=True, env=env)
    assert (
        p.returncode == 2
        and p.stderr.strip()
        == "bootwatch: --compare: no startup with id 999 in the history (ids: bootwatch history --json)"
    )
    p = subprocess.run(
        [*BOOTWATCH, "history", "--html", str(tmp_path / "no" / "dir.html")], capture_output=True, text=True, env=env
    )
    assert p.returncode == 2 and "cannot write it" in p.stderr and "Traceback" not in p.stderr


def test_history_text_has_ids_and_html_alone_writes_only_the_page(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with open_store(home) as store:
        ids = [store.add(_startup(i, "ready", 30.0)) for i in range(12)]
    env = {**os.environ, "BOOTWATCH_HOME": str(home)}
    text = subprocess.run([*BOOTWATCH, "history", "--limit", "10"], capture_output=True, text=True, env=env, timeout=60)
    assert text.returncode == 0, text.stderr
    header, *rows = text.stdout.splitlines()
    assert header.split()[0] == "id" and [r.split()[0] for r in rows if r.strip()[:1].isdigit()] == [
        str(i) for i in ids[-10:]
    ]
    page = tmp_path / "h.html"
    p = subprocess.run(
        [*BOOTWATCH, "history", "--limit", "20", "--html", str(page)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert p.returncode == 0 and p.stdout == f"wrote {page} (12 startup(s))\n", p.stdout
    body = page.read_text()
    assert '<td class="id">11</td>' in body and "<th>source</th>" in body


def test_report_html_says_when_the_log_began(tmp_path: Path) -> None:
    """`report --html`'s "started" is the launch's time by the log's clock, not when the report ran."""
    log = CORPUS / "vllm" / "v0.12-qwen3moe-eager-ready-ansi.log"
    page = tmp_path / "r.html"
    p = subprocess.run(
        [*BOOTWATCH, "report", str(log), "--html", str(page)], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stderr
    first_stamp = next(line for line in log.read_text().splitlines() if " INFO " in line)
    month_day = first_stamp.split(" INFO ")[1].split()[0]  # 'MM-DD' as vLLM writes it
    assert f"-{month_day} " in page.read_text()
