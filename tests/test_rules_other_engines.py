"""TGI, llama.cpp, LMDeploy and TensorRT-LLM: real startups through the public API.

Each test feeds a real log (a corpus log, or a verbatim excerpt of a public log under
tests/fixtures/logs, whose origin is in the `.source` file beside it) to `analyze_path` and checks
what a person watching the server needs: the engine, the verdict, the line that means ready, and for a
failure the line that names the root cause rather than the wrapper lines printed after it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bootwatch.pipeline import analyze_path

from .conftest import CORPUS, FIXTURES

LOGS = FIXTURES / "logs"


def _corpus(rel: str) -> Path:
    path = CORPUS / rel
    if not path.exists():
        pytest.skip(f"corpus log {rel} not available")
    return path


def _phases(summary: dict) -> list[str]:
    return [p["name"] for p in summary["phases"]]


def _first_lines(src: Path, dst: Path, n: int) -> Path:
    """A real log cut short: the same server, watched before it got further."""
    lines = src.read_bytes().split(b"\n")
    dst.write_bytes(b"\n".join(lines[:n]) + b"\n")
    return dst


# ---- TGI ---------------------------------------------------------------------------------------------


def test_tgi_ready_is_the_router_connected_line() -> None:
    s = analyze_path(_corpus("tgi/gemma3-27b-tp2-a6000-ready.log"))
    assert s["engine"] == "tgi"
    assert s["verdict"] == "ready"
    assert s["ready"]["line_no"] == 102
    assert s["ready"]["text"] == "Connected"
    assert s["failure"] is None
    phases = _phases(s)
    for name in ("download", "load_weights", "kv_cache", "cuda_graph", "ready"):
        assert name in phases, phases
    assert phases.index("download") < phases.index("load_weights") < phases.index("ready")
    assert s["facts"]["tp_size"] == 2
    assert s["facts"]["model"] == "/models/gemma-3-27b-it"
    assert s["facts"]["max_batch_total_tokens"] == 52125
    assert s["facts"]["context_length"] == 8000
    # "Unkown compute for card" is a WARN, not a problem
    assert s["warnings"] == []


def test_tgi_starting_webserver_is_not_ready(tmp_path: Path) -> None:
    # Cut the ready log just before "Connected": the router is still warming up.
    src = _corpus("tgi/gemma3-27b-tp2-a6000-ready.log")
    s = analyze_path(_first_lines(src, tmp_path / "tgi-before-connected.log", 101))
    assert s["engine"] == "tgi"
    assert s["verdict"] == "incomplete"
    assert s["ready"] is None
    assert s["failure"] is None


def test_tgi_shard_oom_root_cause_not_shard_cannot_start() -> None:
    s = analyze_path(_corpus("tgi/v2.0-k8s-llama3-70b-tp2-oom-shard-cannot-start.log"))
    assert s["engine"] == "tgi"
    assert s["verdict"] == "failed"
    assert s["ready"] is None
    f = s["failure"]
    assert f["text"].startswith("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB.")
    assert "total capacity" in f["text"]  # the complete copy, not the one cut short at line 193
    assert f["line_no"] == 254
    assert f["category"] == "oom"
    assert "ShardCannotStart" not in f["text"] and "failed to start" not in f["text"]
    # kubectl's "stream logs failed container ..." lines at the top are not the failure
    assert "load_weights" in _phases(s)
    assert s["facts"]["model"] == "meta-llama/Meta-Llama-3-70B-Instruct"


def test_tgi_slow_shard_loading_is_still_loading(tmp_path: Path) -> None:
    # Seven minutes of "Waiting for shard to be ready..." is loading, not a failure.
    src = _corpus("tgi/v2.0-k8s-llama3-70b-tp2-oom-shard-cannot-start.log")
    s = analyze_path(_first_lines(src, tmp_path / "tgi-waiting.log", 150))
    assert s["engine"] == "tgi"
    assert s["verdict"] == "incomplete"
    assert _phases(s)[-1] == "load_weights"


# ---- llama.cpp ---------------------------------------------------------------------------------------


def test_llamacpp_ready_on_listening_line() -> None:
    s = analyze_path(LOGS / "llamacpp-ollama-llama-server-ready-excerpt.log")
    assert s["engine"] == "llamacpp"
    assert s["verdict"] == "ready"
    assert s["ready"]["text"].endswith("llama_server: server is listening on http://127.0.0.1:42577")
    assert s["facts"]["port"] == 42577
    assert s["facts"]["context_length"] == 65536


def test_llamacpp_model_file_cannot_be_opened() -> None:
    s = analyze_path(LOGS / "llamacpp-gguf-open-failed-excerpt.log")
    assert s["engine"] == "llamacpp"
    assert s["verdict"] == "failed"
    f = s["failure"]
    assert f["text"].startswith("gguf_init_from_file: failed to open GGUF file ")
    assert f["line_no"] == 4
    assert f["category"] == "weights"
    # the HTTP port opens before the model loads: that line is not readiness
    assert s["ready"] is None
    assert s["facts"]["model"] == "/home/user/models/ggml-org/gemma-3-12b-it-qat-q4_0.gguf"


def test_llamacpp_exiting_due_to_model_loading_error_points_back_to_the_allocation() -> None:
    s = analyze_path(LOGS / "llamacpp-kv-cache-cuda-oom-excerpt.log", engine="llamacpp")
    assert s["verdict"] == "failed"
    f = s["failure"]
    assert "cudaMalloc failed: out of memory" in f["text"]
    assert f["line_no"] == 4
    assert f["category"] == "oom"
    assert "exiting due to model loading error" not in f["text"]


def test_llamacpp_2026_ready_and_context_capped() -> None:
    # A real llama-server build (see the .source file): elapsed-time prefixes, "srv  llama_server:" tags.
    s = analyze_path(LOGS / "llamacpp-local-cpu-ready-context-capped.log")
    assert s["engine"] == "llamacpp"
    assert s["verdict"] == "ready"
    assert s["ready"]["line_no"] == 10
    assert s["ready"]["text"] == "srv  llama_server: listening on http://127.0.0.1:18705"
    assert "load_weights" in _phases(s)
    assert s["facts"]["model"] == "tiny.gguf"
    assert s["facts"]["port"] == 18705
    assert s["facts"]["context_length"] == 2048  # the slot context after capping
    assert [w["kind"] for w in s["warnings"]] == ["context_capped"]
    assert s["launches"] == 1


def test_llamacpp_2026_port_in_use() -> None:
    s = analyze_path(LOGS / "llamacpp-local-cpu-port-in-use.log")
    assert s["engine"] == "llamacpp"
    assert s["verdict"] == "failed"
    f = s["failure"]
    assert f["line_no"] == 4
    assert "couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 18706" in f["text"]
    assert f["category"] == "port_in_use"


def test_llamacpp_2026_truncated_model_file() -> None:
    s = analyze_path(LOGS / "llamacpp-local-cpu-truncated-gguf.log")
    assert s["engine"] == "llamacpp"
    assert s["verdict"] == "failed"
    f = s["failure"]
    # the loader's own words, not "failed to load model" nor "exiting due to model loading error"
    assert f["line_no"] == 5
    assert f["text"].startswith(
        "llama_model_load: error loading model: tensor 'blk.1.attn_q.weight' data is not within the file bounds"
    )
    assert f["category"] == "weights"


def test_llamacpp_2026_kv_cache_larger_than_memory() -> None:
    s = analyze_path(LOGS / "llamacpp-local-cpu-kv-cache-too-big.log")
    assert s["engine"] == "llamacpp"
    assert s["verdict"] == "failed"
    f = s["failure"]
    # the allocation that failed, not the "failed to create context" echoes after it
    assert f["line_no"] == 7
    assert f["text"].startswith("ggml_aligned_malloc: insufficient memory (attempted to allocate")
    assert f["category"] == "oom"


# ---- LMDeploy ----------------------------------------------------------------------------------------


def test_lmdeploy_ready_on_uvicorn_after_hint() -> None:
    s = analyze_path(_corpus("lmdeploy/pytorch-qwen2vl-ready.log"))
    assert s["engine"] == "lmdeploy"
    assert s["verdict"] == "ready"
    assert s["ready"]["line_no"] == 17
    assert s["ready"]["text"] == "Application startup complete."
    assert s["failure"] is None
    assert "load_weights" in _phases(s)
    assert s["facts"]["port"] == 23333
    # the turbomind -> pytorch fallback is worth a warning, not a failure
    assert [w["kind"] for w in s["warnings"]] == ["engine_fallback"]


def test_lmdeploy_hint_lines_are_not_ready(tmp_path: Path) -> None:
    src = _corpus("lmdeploy/pytorch-qwen2vl-ready.log")
    s = analyze_path(_first_lines(src, tmp_path / "lmdeploy-hint-only.log", 14))
    assert s["engine"] == "lmdeploy"
    assert s["verdict"] == "incomplete"
    assert s["ready"] is None


# ---- TensorRT-LLM ------------------------------------------------------------------------------------


def test_trtllm_autodeploy_ready() -> None:
    s = analyze_path(_corpus("trtllm/v1.2.0rc5-autodeploy-nemotron-nano-ready-elided.log"))
    assert s["engine"] == "trtllm"
    assert s["verdict"] == "ready"
    assert s["ready"]["line_no"] == 57
    assert s["engine_version"] == "1.2.0rc5"
    assert s["failure"] is None  # UCX "incompatible" WARN and the transformers "can yield errors" are benign
    assert s["facts"]["kv_cache_tokens"] == 3958272
    assert "kv_cache" in _phases(s)
    assert s["launches"] == 1  # the MPI worker prints its own version banner


def test_trtllm_pytorch_backend_ready_with_phases() -> None:
    s = analyze_path(LOGS / "trtllm-gptoss120b-pytorch-ready.log")
    assert s["engine"] == "trtllm"
    assert s["verdict"] == "ready"
    assert s["ready"]["line_no"] == 108
    assert s["engine_version"] == "1.1.0rc3"
    phases = _phases(s)
    for name in ("config", "load_weights", "kv_cache", "cuda_graph", "ready"):
        assert name in phases, phases
    load = next(p for p in s["phases"] if p["name"] == "load_weights")
    assert load["progress"] == 1.0
    # the final KV cache, not the temporary one allocated for profiling
    assert s["facts"]["kv_cache_tokens"] == 86720
    assert "context_reduced" in [w["kind"] for w in s["warnings"]]
    assert s["launches"] == 1


def test_trtllm_executor_init_failure_names_the_cpp_error() -> None:
    s = analyze_path(LOGS / "trtllm-gemm-assert-executor-init-excerpt.log")
    assert s["engine"] == "trtllm"
    assert s["verdict"] == "failed"
    f = s["failure"]
    assert f["line_no"] == 2
    assert f["text"].startswith(
        "Failed to initialize executor on rank 0: [TensorRT-LLM][ERROR] Assertion failed: "
        "Error occurred when running GEMM!"
    )


# ---- every excerpt says where it came from -----------------------------------------------------------


@pytest.mark.parametrize("log", sorted(p.name for p in LOGS.glob("*.log")))
def test_fixture_logs_have_a_source(log: str) -> None:
    src = (LOGS / log).with_suffix(".source")
    assert src.exists(), f"{log} has no .source file"
    assert src.read_text("utf-8").strip()


# vLLM and the blind-F batches' LocalAI: readiness when the line that usually says so is missing or unreadable.
VLLM_HEAD = (
    "INFO 04-14 06:00:12 [api_server.py:1034] vLLM API server version 0.8.3\n"
    "INFO 04-14 06:02:33 [api_server.py:1081] Starting vLLM API server on http://0.0.0.0:8000\n"
    "INFO 04-14 06:02:33 [launcher.py:34] Route: /health, Methods: GET\n"
)
VLLM_STATS = (
    "INFO 04-14 06:02:44 [loggers.py:87] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
    "0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%\n"
)


def test_vllm_without_uvicorn_lines_is_ready_at_its_starting_line_once_its_stats_confirm_it(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(VLLM_HEAD + VLLM_STATS)
    s = analyze_path(log)
    assert s["verdict"] == "ready" and s["ready"]["line_no"] == 2


def test_vllm_without_its_starting_line_is_ready_at_its_first_stats_line(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    head = VLLM_HEAD.splitlines(keepends=True)
    log.write_text(head[0] + head[2] + VLLM_STATS)
    s = analyze_path(log)
    assert s["verdict"] == "ready" and s["ready"]["line_no"] == 3


def test_vllm_route_list_alone_is_not_ready(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    head = VLLM_HEAD.splitlines(keepends=True)
    log.write_text(head[0] + head[2])
    assert analyze_path(log)["verdict"] == "incomplete"


def test_localai_named_only_by_its_fiber_banner_is_ready_at_the_banner() -> None:
    s = analyze_path(_corpus("localai/docker-compose-2023-04-fiber-v2.44-gpt4all-j-exits-on-first-request-ready.log"))
    assert (s["engine"], s["verdict"]) == ("localai", "ready")
    # Its top border came before anything named LocalAI; the next line ("Fiber v2.44.0") names it, and the border is
    # then judged again as LocalAI's readiness (the label's ready line, as the corpus's other LocalAI logs)
    assert s["ready"]["line_no"] == 3 and s["ready"]["text"].startswith("┌───")
