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
