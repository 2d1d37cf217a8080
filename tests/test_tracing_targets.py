"""Rust tracing's target (the module path before the message) names the program that logged it: the format takes it
off the message, so no rule sees it there, and a crate only one engine logs from is that engine's evidence."""

from __future__ import annotations

from pathlib import Path

from bootwatch.lines.prefixes import parse_prefix
from bootwatch.pipeline import analyze_path


def test_the_target_is_kept_beside_the_message() -> None:
    p = parse_prefix(
        "2024-07-31T18:10:54.219946Z  INFO mistralrs_server_core::mistralrs_for_server_builder: Model loaded.", 2024
    )
    assert (p.text, p.fmt, p.target) == (
        "Model loaded.",
        "rust_tracing",
        "mistralrs_server_core::mistralrs_for_server_builder",
    )
    # the message's own "error: " is not a target (the format's ambiguity, settled in lines/formats.toml)
    q = parse_prefix("2024-01-01T00:00:00.000000Z ERROR text_generation_launcher: error: CUDA out of memory", 2024)
    assert (q.text, q.target) == ("error: CUDA out of memory", "text_generation_launcher")


def test_a_log_of_lines_no_rule_knows_is_named_by_its_crates(tmp_path: Path) -> None:
    # real mistral.rs lines (tests/corpus/mistralrs/2024-07-...) whose words say nothing of whose they are
    log = tmp_path / "mistralrs.log"
    log.write_text(
        "2024-07-31T18:10:54.188274Z  INFO mistralrs_core::pipeline::paths: Loading `tokenizer.json` at `x`\n"
        "2024-07-31T18:10:54.219946Z  INFO mistralrs_server: Model loaded.\n"
        "2024-07-31T18:10:55.000000Z  INFO mistralrs_core: Beginning dummy run.\n"
    )
    s = analyze_path(log)
    assert s["engine"] == "mistralrs"
    assert s["engine_evidence"].get("mistralrs", 0) > s["engine_evidence"].get("tgi", 0)


def test_dynamo_run_in_text_mode_is_dynamo_and_ready_at_its_prompt(tmp_path: Path) -> None:
    log = tmp_path / "dynamo-run.log"
    log.write_text(
        "2025-03-17T14:03:14.122652Z  INFO dynamo_run: CPU mode. Rebuild with `--features cuda|metal|vulkan` for better performance\n"
        "INFO 03-17 14:03:19 [__init__.py:256] Automatically detected platform cuda.\n"
        "2025-03-17T14:03:50.190381Z  INFO dynamo_run::input::text: Ctrl-c to exit\n"
    )
    s = analyze_path(log)
    assert (s["engine"], s["verdict"], s["ready"]["line_no"]) == ("dynamo", "ready", 3)
