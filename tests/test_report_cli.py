"""`bootwatch report` through the real command line: output, exit codes, and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import CORPUS

BOOTWATCH = [sys.executable, "-m", "bootwatch"]


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*BOOTWATCH, *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, "COLUMNS": "120"}
    )


def test_report_json_matches_spec_shape() -> None:
    p = run("report", "--json", str(CORPUS / "vllm/v0.25-gb10-int4-262k-kv-insufficient.log"))
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout.strip().splitlines()[-1])
    for key in ("verdict", "engine", "engine_version", "ready", "failure", "phases", "facts", "warnings"):
        assert key in s
    assert s["verdict"] == "failed" and s["engine"] == "vllm" and s["engine_version"] == "0.25.1"
    assert s["failure"]["category"] == "oom"
    assert s["failure"]["text"].startswith("ValueError: To serve at least one request")
    assert {"name", "start_line", "end_line", "duration_s", "progress"} <= set(s["phases"][0])
    assert [p["name"] for p in s["phases"]][-1] == "kv_cache"


def test_report_text_names_verdict_cause_and_phases() -> None:
    p = run("report", str(CORPUS / "sglang/rocm-rdna4-tp2-oom-during-weight-load-one-rank.log"))
    assert p.returncode == 0
    out = p.stdout
    assert out.startswith("FAILED")
    assert "torch.OutOfMemoryError: CUDA out of memory" in out
    assert "load_weights" in out and "died here" in out


def test_false_alarm_traceback_and_error_inside_server_args(tmp_path: Path) -> None:
    """The seed's false alarm: 'Traceback' and 'error' inside SGLang's one-line args dump."""
    src = (CORPUS / "sglang/docs-2025-05-no-tp0-prefix-ready.log").read_text()
    bait = "/data/Traceback (most recent call last)/error-RuntimeError-CUDA error/qwen2.5"
    assert "model_path='qwen/qwen2.5-0.5b-instruct'" in src
    log = tmp_path / "bait.log"
    log.write_text(src.replace("model_path='qwen/qwen2.5-0.5b-instruct'", f"model_path='{bait}'"))
    p = run("report", "--json", str(log))
    s = json.loads(p.stdout)
    assert s["verdict"] == "ready" and s["failure"] is None
    assert s["facts"]["model"] == bait


def test_appended_launches_are_judged_on_the_last(tmp_path: Path) -> None:
    ready = (CORPUS / "sglang/docs-2025-05-no-tp0-prefix-ready.log").read_bytes()
    failed = (CORPUS / "sglang/rocm-rdna4-tp2-keyerror-expert-weight-both-ranks.log").read_bytes()
    log = tmp_path / "appended.log"
    log.write_bytes(failed + ready)
    s = json.loads(run("report", "--json", str(log)).stdout)
    assert s["verdict"] == "ready" and s["launches"] == 2
    log.write_bytes(ready + failed)
    s = json.loads(run("report", "--json", str(log)).stdout)
    assert s["verdict"] == "failed" and s["ready"] is None
    assert s["failure"]["text"] == "KeyError: 'model.layers.0.mlp.experts.w2_qweight'"
    assert s["failure"]["procs"] == ["TP0", "TP1"]


def test_speculative_max_running_requests_cut_is_a_warning(tmp_path: Path) -> None:
    # Said out loud (later SGLang): "Max running requests is reset to 48 for speculative decoding."
    s = json.loads(run("report", "--json", str(CORPUS / "sglang/v0.5.16-gb10-nvfp4-capture-0of58-aborted.log")).stdout)
    assert "max_running_requests_reduced" in {w["kind"] for w in s["warnings"]}
    # Silently (SGLang 0.5.2 sets 48 without a word): only the capacity line shows it. The real EAGLE-2 log,
    # with the capacity line as 0.5.2 prints it for the seed's server.
    src = (CORPUS / "sglang/docs-2025-02-eagle2-llama2-two-captures-ready.log").read_text()
    assert "max_running_requests=4097" in src
    log = tmp_path / "silent.log"
    log.write_text(src.replace("max_running_requests=4097", "max_running_requests=48"))
    s = json.loads(run("report", "--json", str(log)).stdout)
    warn = [w for w in s["warnings"] if w["kind"] == "max_running_requests_reduced"]
    assert warn and "48" in warn[0]["text"] and "EAGLE" in warn[0]["text"]


@pytest.mark.parametrize("case", ["missing", "directory", "binary", "invalid_utf8", "huge_line", "empty"])
def test_bad_input_gives_a_message_not_a_traceback(case: str, tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    want_code = 0
    if case == "missing":
        path = tmp_path / "nope.log"
        want_code = 2
    elif case == "directory":
        path = tmp_path
        want_code = 2
    elif case == "binary":
        path.write_bytes(bytes(range(256)) * 4096)
        want_code = 2
    elif case == "invalid_utf8":
        path.write_bytes(b"[2025-05-01 05:11:17] Load weight begin. avail mem=78.58 GB\n\xff\xfe\xc3(bad\n")
    elif case == "huge_line":
        with path.open("wb") as f:
            f.write(b"[2025-05-01 05:11:17] Load weight begin. avail mem=78.58 GB\n")
            f.write(b"x" * (50 << 20) + b"\n")
            f.write(b"[2025-05-01 05:11:23] The server is fired up and ready to roll!\n")
    elif case == "empty":
        path.write_bytes(b"")
    p = run("report", str(path), timeout=300)
    assert p.returncode == want_code, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    if want_code == 2:
        assert p.stderr.startswith("bootwatch: ") and len(p.stderr.splitlines()) == 1
    if case == "huge_line":
        assert "cut" in p.stdout
    if case == "empty":
        assert "INCOMPLETE" in p.stdout and "empty" in p.stdout


def test_report_of_many_appended_launches_reads_only_the_last(tmp_path: Path) -> None:
    """The backwards scan for the last launch gives the same summary as reading every byte."""
    from bootwatch.pipeline import analyze_path

    logs = sorted(CORPUS.glob("*/*.log"))
    for tail in (logs[-1], logs[3], logs[20], CORPUS / "vllm/v0.9.1-wrapper-argparse-error-then-port-in-use.log"):
        log = tmp_path / "many.log"
        log.write_bytes(b"".join(p.read_bytes() for p in logs) * 2 + tail.read_bytes())
        fast, full = analyze_path(log), analyze_path(log, exhaustive=True)
        assert fast.get("skipped_bytes", 0) > 0
        for key in (
            "verdict",
            "engine",
            "engine_version",
            "ready",
            "failure",
            "phases",
            "facts",
            "warnings",
            "launch_start_line",
            "last_line_no",
        ):
            assert fast[key] == full[key], (tail.name, key)


def test_utf16_log_with_bom_is_read_as_text(tmp_path: Path) -> None:
    # PowerShell's `python -m vllm... > log.txt` writes UTF-16 LE with a BOM
    src = (CORPUS / "sglang/docs-2025-05-no-tp0-prefix-ready.log").read_text("utf-8")
    for enc in ("utf-16", "utf-32"):
        log = tmp_path / f"{enc}.log"
        log.write_bytes(src.encode(enc))
        p = run("report", "--json", str(log))
        assert p.returncode == 0, p.stderr
        s = json.loads(p.stdout)
        assert s["verdict"] == "ready" and s["engine"] == "sglang"
        assert s["ready"]["text"] == "The server is fired up and ready to roll!"


def test_nul_run_left_by_copytruncate_is_skipped(tmp_path: Path) -> None:
    src = (CORPUS / "sglang/docs-2025-05-no-tp0-prefix-ready.log").read_bytes()
    log = tmp_path / "copytruncated.log"
    log.write_bytes(b"\x00" * 200_000 + src)
    p = run("report", "--json", str(log))
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert s["verdict"] == "ready"
    assert s["ready"]["line_no"] == src.count(b"\n", 0, src.index(b"fired up")) + 1


@pytest.mark.parametrize("enc", ["gbk", "cp1252", "latin-1"])
def test_a_log_in_a_legacy_encoding_is_read_as_the_text_it_is(tmp_path: Path, enc: str) -> None:
    # A Chinese Windows console writes GBK (cp936), a Western one cp1252: not UTF-8, but text all the same.
    words = "正在加载模型权重 第{}部分" if enc == "gbk" else "Chargement des poids du modèle, partie n°{} déjà prêt"
    text = (
        "INFO 11-18 17:10:46 api_server.py:585] vLLM API server version 0.6.4.post1\n"
        + "".join(f"INFO 11-18 17:10:47 loader.py:1] {words.format(i)}\n" for i in range(30))
        + f"ERROR 11-18 17:10:48 engine.py:1] torch.OutOfMemoryError: CUDA out of memory. {words.format(99)}\n"
    )
    log = tmp_path / f"{enc}.log"
    log.write_bytes(text.encode(enc))
    p = run("report", "--json", str(log))
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert s["verdict"] == "failed" and s["engine"] == "vllm" and s["failure"]["category"] == "oom"
    assert s["failure"]["line_no"] == 32 and s["failure"]["text"].endswith(words.format(99)), s["failure"]
    ready = tmp_path / f"{enc}-ready.log"
    ready.write_bytes(text.rsplit("ERROR", 1)[0].encode(enc) + b"INFO:     Application startup complete.\n")
    assert run("probe", str(ready)).returncode == 0


def test_binary_files_are_refused_whatever_their_bytes(tmp_path: Path) -> None:
    import gzip
    import random

    rnd = random.Random(8)
    blobs = {
        "elf": Path(sys.executable).resolve().read_bytes()[:200_000],
        "gzip": gzip.compress((CORPUS / "vllm/v0.11-elloraa-gloo-ready.log").read_bytes() * 20),
        "high": bytes(b | 0x80 for b in rnd.randbytes(100_000)),  # no control byte at all
    }
    for name, data in blobs.items():
        log = tmp_path / f"{name}.log"
        log.write_bytes(data)
        p = run("report", str(log))
        assert p.returncode == 2 and "binary data" in p.stderr, (name, p.stderr)


@pytest.mark.parametrize("run_of", ["nul", "z", "sparse"])
def test_the_banner_after_an_over_long_run_without_a_newline_is_read(tmp_path: Path, run_of: str) -> None:
    # A run longer than a line may be (1 MiB) glued to the banner: copytruncate's NUL hole, a file's sparse hole,
    # any bytes with no newline. The run is cut and the banner after it read as the line it is.
    src = (
        "INFO 11-18 17:10:46 api_server.py:585] vLLM API server version 0.6.4.post1\n"
        + "".join(f"INFO 11-18 17:10:47 loader.py:1] loading part {i}\n" for i in range(30))
        + "INFO:     Application startup complete.\n"
    ).encode()
    log = tmp_path / "long-run.log"
    with log.open("wb") as f:
        if run_of == "sparse":
            f.seek(256 << 20)
        else:
            f.write((b"\0" if run_of == "nul" else b"z") * ((1 << 20) + 1))
        f.write(src)
    for how in ([], ["--exhaustive"]):
        p = run("report", "--json", *how, str(log))
        assert p.returncode == 0, p.stderr
        s = json.loads(p.stdout)
        assert s["verdict"] == "ready" and s["engine"] == "vllm" and s["ready"]["line_no"] == 32, (how, s["verdict"])


def test_random_bytes_are_still_refused_as_binary(tmp_path: Path) -> None:
    import random

    log = tmp_path / "blob.gz"
    log.write_bytes(random.Random(7).randbytes(100_000))
    p = run("report", str(log))
    assert p.returncode == 2 and "binary" in p.stderr


@pytest.mark.parametrize("how", ["redirect", "pipe"])
def test_report_dash_reads_standard_input(how: str) -> None:
    log = CORPUS / "vllm" / "2025-11-rocm-rx7800xt-compose-ovis2-gptq-older-base-ready.log"
    argv = [*BOOTWATCH, "report", "--json", "-"]
    if how == "redirect":
        with log.open("rb") as f:
            p = subprocess.run(argv, stdin=f, capture_output=True, timeout=60)
    else:
        p = subprocess.run(argv, input=log.read_bytes(), capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert (s["verdict"], s["engine"]) == ("ready", "vllm")
    assert s["lines"] == log.read_bytes().count(b"\n")
