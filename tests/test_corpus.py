"""bootwatch report over every real, labelled log: verdict, root-cause line, ready line and engine.

A few logs are known misses, each with its reason: they are expected to fail (strictly: a fix that makes one
pass fails the suite until it leaves this list), so the count of what does not work stays visible.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import corpus_labels, corpus_name, corpus_params
from .corpus_scoring import judge

KNOWN_MISSES = {
    "triton/2025-01-trtllm-backend-8gpu-unable-to-find-backend-library-tensorrtllm-failed": "an excerpt of Triton's core lines only (CUDA pools, model loading, TRITONBACKEND_ calls), which Triton-with-TensorRT-LLM logs labelled trtllm print too: the engine stays unknown and Triton's `failed to load` rule does not apply (G21, not yet fixed)",
    "lmdeploy/2024-11-turbomind-offline-pipeline-internvl2-2b-intern-studio-two-chat-turns-ready": "an offline TurboMind pipeline: its first reader's ready line (the last init line before the first chat) has no rule; LMDeploy's rules know only its server's readiness (found in G21, scored, not yet fixed)",
    "ollama/journalctl-reverse-order-nfs-mkdir-mnt-llm-permission-denied-failed": "a journal printed newest first (journalctl -r): the daemon's launch line comes after its death",
    "llamacpp/2026-docker-windows-powershell-80col-wrapped-tail20-gguf-missing": "lines hard-wrapped at 80 columns by a terminal: the cause is glued into the middle of another line",
    "sglang/v0.5.12-rtx3090-fp8-kv-triton-fp8e4nv-unsupported-tail-fragment": "a fragment that starts inside a traceback: the error quoted below Triton's CompilationError is not reached",
    "tgi/v1.3-py-tgi-wrapper-prefixed-ready-no-connected-line": "readiness is announced only by the user's own wrapper script",
    "sglang/ascend-k8s-nightly-qwen3-235b-w8a8-dp16-eagle-draft-graph-capture-reshapeandcache-setup-failed": "the first rank's error is glued onto a tqdm bar's line; the generic 'Inner error is reported as above' wrapper is chosen",
    "dynamo/2025-10-k8s-frontend-trtllm-gpt-oss-120b-endpoints-enabled-at-worker-ready-then-toggle-next-day-ready": "the frontend is ready at its bind by the rule and the corpus's earlier Dynamo label; both readers of G9 took the line where a worker's chat endpoints were enabled",
    "koboldcpp/koboldcpp-1.69-windows-cublas-dll-init-winerror-1114-transcribed-failed": "a transcribed screenshot: the first exception's line has a full-width colon and a misspelt traceback header, so the chained exception below it is taken",
    "uvicorn/mlx-openai-server-2025-07-internvl3-14b-vlm-model-type-internvl-chat-not-supported-lifespan-failed": "the paste is cut two lines into the lifespan's traceback: no exception line and no 'Application startup failed' close it",
    "mlx_lm/0.31.3-gemma4-unified-model-type-not-supported-failed": "a chained exception: both readers of G16 took the first (ModuleNotFoundError); bootwatch takes the ValueError mlx_lm raises while handling it, as the corpus's transformers label (sglang v0.5.8 glm_moe_dsa) does",
    "sglang/0.4.3.post2-eagle-spec-awq-70b-tp2-cuda-graph-shape-mismatch-failed": "the poster's bold copy ('**RuntimeError: …**') of the error above the pasted traceback is the label's cause; bootwatch takes the same exception line inside the traceback",
    "localai/1.x-fiber-2.44-compose-macos-intel-gpt4all-j-lazy-load-exit-137-ready": "every line followed by a blank one (a doubled-newline paste): Fiber's top border is no longer the line just before the line that names LocalAI, so readiness is taken at that second line",
}
KNOWN_ENGINE_MISSES = {
    "triton/2025-01-trtllm-backend-8gpu-unable-to-find-backend-library-tensorrtllm-failed": "Triton's core lines only: they are also the TensorRT-LLM backend's logs' (labelled trtllm), so they do not name Triton alone",
    "aphrodite/0.9.0-uv-run-aphrodite-yaml-subcommand-removed-invalid-choice-failed": "argparse's refusal of a subcommand: the usage names 'aphrodite', but usage lines are not evidence yet (G21, not yet fixed)",
    "dynamo/dynamo-run-source-build-out-vllm-qwen2.5-3b-vllm-0.7.3-mismatch-rust-panic-failed": "dynamo-run's panic and the pasted command line name it; a panic's source path is not its evidence yet (G21, not yet fixed)",
    "dynamo/dynamo-run-venv-out-sglang-0.4.4-qwen2.5-0.5b-waiting-for-sglang0-stall-incomplete": "dynamo-run relaying SGLang: the engine's lines outweigh the one dynamo_llm line (G21, not yet fixed)",
    "tgi/docker-logs-2024-01-launcher-unexpected-argument-tokenizer-config-path-failed": "clap's argument error names no engine (the launcher's usage is cut off)",
    "triton/20.03-yolov5-v1-api-starting-httpservice-polling-repository-ready": "Triton 20.03's older wording ('Starting HTTPService at') is not its evidence yet (G21, not yet fixed)",
    "trtllm/1.1.0rc3-docker-2x-rtx5060ti-qwen3-30b-a3b-fp4-stuck-loading-weights-quantization-warnings-incomplete": "an excerpt of FP4 scale warnings only: nothing in it names TensorRT-LLM strongly enough",
    "koboldcpp/2026-linux-rocm-hybrid-gated-delta-net-model-warmup-fattn-ggml-assert-failed": "an excerpt of the llama.cpp library lines KoboldCpp runs: nothing in it names KoboldCpp",
    "koboldcpp/rocm-fork-1.8x-arch-rx6800xt-hipvmm-tensors-offloaded-context-init-cut-incomplete": "an excerpt of llama.cpp's loader lines in the ROCm fork: nothing in it names KoboldCpp",
    "localai/v2.8.0-compose-ubuntu16.04-ec2-g3-pthread-create-operation-not-permitted-sigabrt-failed": "Go's runtime dies before LocalAI prints a line: only the compose service name ('llai-api-1') hints at it",
    "uvicorn/llama-cpp-python-2024-04-ai-lab-recipes-make-build-mistral-7b-v0.1-container-uvicorn-8001-ready": "llama-cpp-python's server embeds llama.cpp: its loader lines read as llama.cpp (readiness is uvicorn's bind either way)",
    "llamacpp/ik-llama-cpp-server-feb2025-15-gpus-deepseek-r1-q2k-mla-compute-buffer-cudamalloc-oom-free-invalid-pointer-fragment": "a fragment of ik_llama.cpp's context setup (llama_kv_cache_init, ggml_backend_cuda): nothing in it names llama.cpp strongly enough",
    "llamacpp/b3581-metal-macos-old-format-log-elided-during-load": "llama-server run on Ollama's model blobs: the blob paths outweigh the cut-short llama.cpp lines",
    "ollama/rocm-dolphin3-llama31-8b-unable-to-allocate-rocm0-buffer-failed-excerpt": "an excerpt of the llama.cpp lines Ollama relays: nothing in it names Ollama",
    "uvicorn/llama-cpp-python-cpu-qwen36-35b-a3b-q2k-uvicorn-running-ready-head-tail-excerpt": "llama-cpp-python's server embeds llama.cpp: its loader lines read as llama.cpp (readiness is uvicorn's bind either way)",
    "vllm/nim-1.0-gke-l4-cloud-assist-log-view-cut-mid-engine-init-incomplete": "NIM 1.0 starts TensorRT-LLM's runtime before vLLM; the view is cut before vLLM's engine line",
    "sglang/v0.5.6-killed-right-after-launch-single-jit-line": "a single JIT line before the kill names no engine",
    "sglang_router/ascend-k8s-volcano-pd-minilb-python-router-uvicorn-ready-mmlu-gsm8k-ok": "the mini load balancer's lines are SGLang's: read as SGLang, not its router",
    "triton/v2.23.0-r22.06-custom-tensorrt-backend-bert-x3-hash-commented-output-ready": "every line commented out by the poster with '# ': no rule anchored at a message sees past it",
    "uvicorn/mlx-openai-server-2025-07-internvl3-14b-vlm-model-type-internvl-chat-not-supported-lifespan-failed": "mlx-openai-server loads through mlx_lm and is read as mlx_lm; the label calls it a uvicorn app",
    "sglang_router/2024-12-router-launch-worker-port-in-use-unhealthy-failed": "the router's launcher starts SGLang workers in its own process: every line of this one is a worker's (SGLang's format, TP ranks), and the router prints none before it fails",
    "koboldcpp/1.42-windows-cuda-codellama-34b-gqa-attn-k-wrong-shape-exit-3-failed": "a KoboldCpp excerpt of llama.cpp's loader lines only: nothing in it names KoboldCpp",
    "llamacpp/wrapper-banner-phi4-mini-log-disable-no-server-output-incomplete": "llama-server ran with --log-disable: only the user's wrapper banner, which names no engine",
    "lmstudio/0.4.12-windows-gemma4-e4b-gguf-missing-tensor-model-load-failed": "an excerpt of the llama.cpp loader lines LM Studio runs: nothing in it names LM Studio",
    "unknown/text-generation-webui-systemd-user-rocm-vega-llamacpp-phi2-home-3b-openai-ext-ready": "its llama.cpp loader lines (llama-cpp-python, in process) outweigh the web UI's few lines of its own",
}


@pytest.mark.parametrize("label", corpus_params(KNOWN_MISSES))
def test_corpus_log(label: Path) -> None:
    j = judge(label)
    assert j.verdict_ok, j.why()
    assert j.cause_ok is not False, j.why()
    assert j.ready_ok is not False, j.why()


@pytest.mark.parametrize("label", corpus_params(KNOWN_ENGINE_MISSES))
def test_corpus_engine(label: Path) -> None:
    j = judge(label)
    assert j.engine_ok, j.why()


def test_known_misses_are_in_the_corpus() -> None:
    names = {corpus_name(p) for p in corpus_labels()}
    assert set(KNOWN_MISSES) <= names and set(KNOWN_ENGINE_MISSES) <= names


def test_index_lists_every_log_with_current_counts() -> None:
    import subprocess
    import sys

    script = Path(__file__).resolve().parent.parent / "scripts" / "corpus-index"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
