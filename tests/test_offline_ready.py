"""An engine used offline, as a library (vLLM's or Aphrodite's LLM(), no HTTP server): nothing in its startup says
ready, since a server's engine prints the same lines; its first batch of prompts proves it was ready, at the last
line of its startup before them (the corpus's convention: tests/corpus/INDEX.md)."""

from __future__ import annotations

from pathlib import Path

from bootwatch.pipeline import analyze_path

from .conftest import CORPUS

APHRODITE = CORPUS / "aphrodite" / "v0.4.2-langchain-offline-llm-tp4-ray-mythalion-13b-gpu-blocks-ready.log"
VLLM_V0 = CORPUS / "vllm" / "nim-1.0-gke-l4-kubectl-json-lines-llama3-8b-ready.log"


def report(tmp_path: Path, text: str) -> dict:
    log = tmp_path / "offline.log"
    log.write_text(text)
    return analyze_path(log)


def _lines(path: Path) -> list[str]:
    return path.read_text("utf-8").split("\n")


def test_offline_aphrodite_is_ready_at_its_kv_cache_line_once_prompts_run(tmp_path: Path) -> None:
    s = report(tmp_path, APHRODITE.read_text("utf-8"))
    assert s["verdict"] == "ready" and s["engine"] == "aphrodite", s
    assert s["ready"] == {"line_no": 16, "text": "# GPU blocks: 11902, # CPU blocks: 1310"}
    assert s["time_to_ready_s"] == 143.0  # 11:41:35 to 11:43:58: the KV cache line's time, not the prompts' bar's


def test_the_kv_cache_line_alone_is_not_readiness(tmp_path: Path) -> None:
    # A server's engine prints the same line, then still has to start its HTTP server: no prompts yet, no verdict.
    head = "\n".join(x for x in _lines(APHRODITE) if not x.startswith("Processed prompts")) + "\n"
    assert report(tmp_path, head)["verdict"] == "incomplete"


def test_offline_vllm_v0_is_ready_when_its_cuda_graphs_are_captured(tmp_path: Path) -> None:
    # vLLM 0.4 has no 'init engine ... took' line: the graph capture after the KV cache is its last startup step.
    vllm = _lines(VLLM_V0)
    start = next(i for i, x in enumerate(vllm) if "Initializing an LLM engine (v0.4.1)" in x)
    end = next(i for i, x in enumerate(vllm) if "Graph capturing finished in 9 secs." in x)
    prompts = next(x for x in _lines(APHRODITE) if x.startswith("Processed prompts"))
    s = report(tmp_path, "\n".join([*vllm[start : end + 1], "", prompts]) + "\n")
    assert s["verdict"] == "ready" and s["engine"] == "vllm", s
    assert s["ready"]["text"] == "Graph capturing finished in 9 secs."
