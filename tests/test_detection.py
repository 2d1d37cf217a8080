"""Engine detection from the weight of evidence over many lines, and what a generic server's readiness means."""

from __future__ import annotations

from pathlib import Path

from bootwatch.pipeline import analyze_path

UVICORN_BIND_FAIL = """\
INFO:     Started server process [4242]
INFO:     Waiting for application startup.
INFO:     Application startup complete.
ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use
INFO:     Waiting for application shutdown.
INFO:     Application shutdown complete.
"""

UVICORN_READY = """\
INFO:     Started server process [4242]
INFO:     Waiting for application startup.
INFO:     Application startup complete.
INFO:     Uvicorn running on http://0.0.0.0:23333 (Press CTRL+C to quit)
"""

# SGLang at --log-level warning behind an unknown collector prefix: nothing names the engine until its warm-up
# fails with SGLang's module paths in the traceback; uvicorn's lines were not readiness.
SGLANG_QUIET_WARMUP_FAIL = """\
gke-node-1 | INFO:     Started server process [77]
gke-node-1 | INFO:     Waiting for application startup.
gke-node-1 | INFO:     Application startup complete.
gke-node-1 | INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
gke-node-1 | Traceback (most recent call last):
gke-node-1 |   File "/usr/local/lib/python3.10/dist-packages/sglang/srt/entrypoints/http_server.py", line 990, in _wait_and_warmup
gke-node-1 |     raise RuntimeError(res.text)
gke-node-1 | RuntimeError: warmup request failed: CUDA error: an illegal memory access was encountered
"""


def report(tmp_path: Path, text: str) -> dict:
    log = tmp_path / "s.log"
    log.write_text(text)
    return analyze_path(log)


def test_plain_uvicorn_server_is_ready_once_it_listens(tmp_path: Path) -> None:
    s = report(tmp_path, UVICORN_READY)
    assert s["verdict"] == "ready" and s["ready"]["line_no"] == 4


def test_plain_uvicorn_server_that_cannot_bind_failed(tmp_path: Path) -> None:
    s = report(tmp_path, UVICORN_BIND_FAIL)
    assert s["verdict"] == "failed", s
    assert "[Errno 98]" in s["failure"]["text"] and s["failure"]["category"] == "port_in_use"


# llama-cpp-python's server: llama.cpp's loader lines (the engine reads as llama.cpp), then uvicorn.
GGML_LOADER = """\
llama_model_loader: loaded meta data with 48 key-value pairs and 733 tensors from /m/Q2_K.gguf (version GGUF V3 (latest))
llama_model_loader: - kv   0:                       general.architecture str              = qwen35moe
"""


def test_llama_cpp_python_is_ready_at_the_bind_and_fails_when_it_cannot_bind(tmp_path: Path) -> None:
    ready = report(tmp_path, GGML_LOADER + UVICORN_READY)
    assert ready["engine"] == "llamacpp" and ready["verdict"] == "ready"
    assert ready["ready"]["text"].startswith("Uvicorn running on")
    failed = report(tmp_path, GGML_LOADER + UVICORN_BIND_FAIL)
    assert failed["verdict"] == "failed", failed
    assert failed["failure"]["category"] == "port_in_use"


def test_known_engine_evidence_overrules_generic_readiness(tmp_path: Path) -> None:
    s = report(tmp_path, SGLANG_QUIET_WARMUP_FAIL)
    assert s["engine"] == "sglang"
    assert s["verdict"] == "failed", s
    assert s["failure"]["text"].startswith("RuntimeError: warmup request failed")


def test_one_vllm_path_in_an_sglang_log_does_not_make_it_vllm(tmp_path: Path) -> None:
    text = (
        "[2025-05-01 05:11:17] server_args=ServerArgs(model_path='m')\n"
        '  File "/usr/lib/python3/site-packages/vllm/model_executor/layers/x.py", line 3, in f\n'
        "[2025-05-01 05:11:19] Load weight begin. avail mem=78.58 GB\n"
    )
    assert report(tmp_path, text)["engine"] == "sglang"


def test_a_bar_with_no_label_counts_the_phase_under_way(tmp_path: Path) -> None:
    """SGLang's older CUDA-graph capture draws a bare tqdm bar (`  3%|▎  | 1/34 [...]`): it is that phase's
    progress, not nothing."""
    log = tmp_path / "sglang.log"
    log.write_text(
        "[2025-02-04 06:15:44 TP0] Capture cuda graph begin. This can take up to several minutes.\n"
        "\r  0%|          | 0/34 [00:00<?, ?it/s]\r  3%|▎         | 1/34 [00:01<00:43,  1.30s/it]"
        "\r 50%|█████     | 17/34 [00:04<00:04,  4.18it/s]\n"
    )
    s = analyze_path(log, engine="sglang")
    (graph,) = [p for p in s["phases"] if p["name"] == "cuda_graph"]
    assert (graph["n"], graph["total"], graph["progress"]) == (17, 34, 0.5)


# A pasted terminal session (TGI issue: clap rejects the value before the launcher prints anything of its own).
PROMPT_THEN_CLAP_ERROR = """\
(text-generation-inference) tammosta@SEA-1801247735:~/text-generation-inference$ text-generation-launcher --env
error: invalid value 'True' for '--disable-custom-kernels'
  [possible values: true, false]
"""


def test_a_pasted_shell_prompt_names_the_engine_its_command_starts(tmp_path: Path) -> None:
    s = report(tmp_path, PROMPT_THEN_CLAP_ERROR)
    assert s["engine"] == "tgi" and s["verdict"] == "failed", s
    assert s["failure"]["text"].startswith("error: invalid value 'True'")
    # the same words without a prompt are an argument to something else: a program named in a comment is not evidence
    s = report(tmp_path, PROMPT_THEN_CLAP_ERROR.replace("tammosta@SEA-1801247735:~/text-generation-inference$ ", "# "))
    assert s["engine"] != "tgi", s


def test_a_bare_hash_is_no_prompt(tmp_path: Path) -> None:
    # vLLM's `# GPU blocks: …` and a comment begin with "# ": only user@host# is a root shell's prompt
    import re

    from bootwatch.engines.prefilter import SHELL_PROMPT

    assert re.match(SHELL_PROMPT, "# vllm serve meta-llama/Llama-3-8B") is None
    assert re.match(SHELL_PROMPT, "root@0a1b:/workspace# vllm serve x").group("command") == "vllm serve x"


def test_a_compose_service_named_after_an_engine_is_its_least_evidence(tmp_path: Path) -> None:
    # localai/v1.40.0-cublas-cuda12-compose-rebuild-grpc-server-absl-cmake-failed.log: a build's output, nothing else
    build = "CMake Error at CMakeLists.txt:42 (find_package):\n"
    s = report(tmp_path, "localai-api-1  | " + build)
    assert s["engine"] == "localai", s
    assert report(tmp_path, "web-1  | " + build)["engine"] == "unknown"
    # the engine's own lines outweigh what its service was called
    s = report(tmp_path, "localai-api-1  | " + SGLANG_QUIET_WARMUP_FAIL.replace("gke-node-1 | ", "localai-api-1  | "))
    assert s["engine"] == "sglang", s
