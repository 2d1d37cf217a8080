"""Line normalisation, each case with real lines from the corpus."""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from bootwatch.lines import Normalizer


def one(raw: str, year: int = 2025):
    out = Normalizer(year).lines(7, raw)
    assert len(out) == 1, out
    return out[0]


def test_ansi_stripped_from_vllm_process_tag() -> None:
    # vllm/v0.11-elloraa-gloo-ready.log: the tag is coloured even in a file
    line = one(
        "\x1b[1;36m(APIServer pid=238615)\x1b[0;0m INFO 10-24 21:43:35 [api_server.py:1839] "
        "vLLM API server version 0.11.0"
    )
    assert line.text == "vLLM API server version 0.11.0"
    assert line.proc == "APIServer" and line.level == "INFO" and line.fmt == "vllm"
    assert "\x1b" not in line.raw


def test_carriage_return_progress_updates_are_split() -> None:
    # sglang/docs-2025-01-skip-tokenizer-init-ready.log: one physical line, \r-separated tqdm states
    raw = (
        "  0%|          | 0/23 [00:00<?, ?it/s]\r  4%|▍         | 1/23 [00:00<00:13,  1.67it/s]"
        "\r100%|██████████| 23/23 [00:07<00:00,  3.19it/s]\r\n"
    )
    segs = Normalizer(2025).lines(3, raw)
    assert [s.text for s in segs][-1].startswith("100%")
    assert [s.update for s in segs] == [True, True, False]
    assert all(s.no == 3 for s in segs)


def test_message_glued_onto_progress_bar_is_split_at_the_prefix() -> None:
    # sglang/rocm-rdna4-tp2-keyerror-expert-weight-both-ranks.log
    raw = (
        "Loading safetensors checkpoint shards:   0% Completed | 0/1 [00:00<?, ?it/s]"
        "[2026-05-25 17:26:25 TP1] Scheduler hit an exception: Traceback (most recent call last):"
    )
    first, second = Normalizer(2025).lines(1, raw)
    assert first.text.startswith("Loading safetensors checkpoint shards")
    assert second.text == "Scheduler hit an exception: Traceback (most recent call last):"
    assert second.proc == "TP1"


def test_python_logging_glued_onto_custom_unit_bar() -> None:
    # vllm/v0.25-gb10-nvfp4-dflash-ready-10min-warmup.log (flashinfer autotuner, unit "profile/s")
    raw = (
        "(EngineCore pid=23397) \r[AutoTuner]: Tuning trtllm::fused_moe::gemm1:   0%|          | 0/21 "
        "[00:00<?, ?profile/s]2026-08-01 21:21:53,817 - INFO - autotuner.py:1351 - flashinfer.jit: "
        "[Autotuner]: Skipped 4 unsupported tactic(s)"
    )
    lines = Normalizer(2025).lines(1, raw)
    assert lines[-2].text.startswith("[AutoTuner]: Tuning")
    assert lines[-1].text == "flashinfer.jit: [Autotuner]: Skipped 4 unsupported tactic(s)"
    assert lines[-1].level == "INFO" and lines[-1].t is not None


def test_error_glued_onto_an_indicatif_download_bar() -> None:
    # mistralrs/2024-04-mistral-gguf-cuda-mistral-7b-v0.2-config-json-null-usize-failed.log: hf-hub's bar has no
    # newline at its end, so mistral.rs's `Error:` is printed on the bar's line
    raw = (
        "config.json [00:00:00] [████████████████████] 596 B/596 B 3.50 KiB/s (0s)"
        "Error: invalid type: null, expected usize at line 19 column 24"
    )
    bar, err = Normalizer(2025).lines(1, raw)
    assert bar.text.endswith("3.50 KiB/s (0s)")
    assert err.text == "Error: invalid type: null, expected usize at line 19 column 24" and err.no == 1
    # a finished bar alone, or with only spaces after it, is one line
    assert len(Normalizer(2025).lines(1, "tokenizer.json [00:00:01] [████] 1.71 MiB/1.71 MiB 1.2 MiB/s (0s)  ")) == 1


def test_escape_drawn_as_an_arrow_is_removed() -> None:
    # uvicorn/litellm-proxy-windows-powershell-azure-gpt-5.4-arrow-escapes-unformatted-uvicorn-ready.log: a console
    # without VT processing drew ESC as "←", and the user copied the text
    line = one("←[32mINFO←[0m:     Application startup complete.")
    assert line.text == "Application startup complete." and line.level == "INFO"
    assert "←" not in line.raw
    assert one("a ← b [1m").text == "a ← b [1m"  # an arrow that starts no colour sequence stays


def test_sglang_prefix_with_and_without_ranks() -> None:
    # sglang/docs-2024-11-llama31-8b-ready.log and sglang/docs-2025-05-no-tp0-prefix-ready.log
    a = one("[2024-10-31 21:56:28 TP0] Init torch distributed begin.")
    assert (a.proc, a.fmt, a.text) == ("TP0", "sglang", "Init torch distributed begin.")
    assert a.t == 1730411788.0
    b = one("[2025-05-01 05:11:17] Load weight begin. avail mem=78.58 GB")
    assert b.proc is None and b.text == "Load weight begin. avail mem=78.58 GB"
    # sglang/ascend-npu-multinode-pd-decode-worker-runtime-abort-garbled.log: DP/TP/EP tags
    c = one("[2026-01-14 12:09:46 DP16 TP16 EP16] Decode batch, #running-req: 17, #token: 86400")
    assert c.proc == "TP16" and c.text.startswith("Decode batch")


def test_sglang_2026_format_with_level_and_file() -> None:
    # sglang/docs-2026-02-ngram-spec-warning-level-no-ready-line.log
    line = one(
        "[2026-02-08 14:57:21] INFO server_args.py:1796: Attention backend not specified. Use fa3 backend by default."
    )
    assert line.level == "INFO" and line.text.startswith("Attention backend not specified")


def test_sglang_reformatted_uvicorn_line() -> None:
    # SGLang's stamp on uvicorn's line: uvicorn's level, SGLang's prefix family (evidence of SGLang)
    line = one("[2024-10-31 21:56:40] INFO:     Application startup complete.")
    assert line.text == "Application startup complete." and line.fmt == "sglang" and line.level == "INFO"


def test_vllm_v0_prefix_without_brackets() -> None:
    # vllm/v0.5.5-mistral7b-ready-uvicorn-only-truncated.log
    line = one("INFO 04-28 16:55:11 api_server.py:440] vLLM API server version 0.5.5", year=2024)
    assert line.text == "vLLM API server version 0.5.5" and line.level == "INFO"


def test_vllm_v1_worker_tags() -> None:
    # vllm/v0.8.3-v1-offline-tp2-vllmworker-rank-prefix-init-done.log
    a = one(
        "(VllmWorker rank=1 pid=158678) INFO 07-08 02:34:33 [parallel_state.py:957] rank 1 in world "
        "size 2 is assigned as DP rank 0, PP rank 0, TP rank 1"
    )
    assert a.proc == "VllmWorker_rank1" and a.text.startswith("rank 1 in world size 2")
    # vllm/v0.22-tp2-t4-lora-ready-shm-wait-then-worker-crash.log
    b = one("(Worker_TP1 pid=301) ERROR 05-26 07:06:39 [multiproc_executor.py:839] WorkerProc hit an exception.")
    assert (b.proc, b.level, b.text) == ("Worker_TP1", "ERROR", "WorkerProc hit an exception.")
    # vllm/v0.25-gb10-int4-262k-kv-insufficient.log: untagged tqdm under a tag
    c = one("(EngineCore pid=6890) Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:00<00:00,  1.1it/s]")
    assert c.proc == "EngineCore" and c.text.startswith("Loading safetensors")


def test_uvicorn_plain_and_tagged() -> None:
    assert one("INFO:     Application startup complete.").text == "Application startup complete."
    line = one("(APIServer pid=228) INFO:     Application startup complete.")
    assert line.proc == "APIServer" and line.fmt == "uvicorn"


def test_tgi_launcher_and_router_lines() -> None:
    # tgi/gemma3-27b-tp2-a6000-ready.log
    a = one("2025-07-04T12:36:15.367126Z  INFO text_generation_router::server: router/src/server.rs:2298: Connected")
    assert (a.text, a.level, a.fmt) == ("Connected", "INFO", "rust_tracing")
    b = one(
        "2025-07-04T12:35:19.889835Z  INFO shard-manager: text_generation_launcher: Waiting for shard to be "
        "ready... rank=1"
    )
    assert b.text == "Waiting for shard to be ready... rank=1"
    # tgi/v2.0-k8s-llama3-70b-tp2-oom-shard-cannot-start.log: torch's per-rank stderr prefix
    c = one("[rank1]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB.")
    assert c.proc == "rank1" and c.text.startswith("torch.cuda.OutOfMemoryError")


def test_lmdeploy_trtllm_and_glog_prefixes() -> None:
    a = one("2025-07-08 11:20:26,869 - lmdeploy - WARNING - __init__.py:10 - Disable DLSlime Backend")
    assert (a.text, a.level) == ("Disable DLSlime Backend", "WARNING")
    b = one("[12/20/2025-03:35:50] [TRT-LLM] [I] Using LLM with AutoDeploy backend")
    assert (b.text, b.level, b.fmt) == ("Using LLM with AutoDeploy backend", "INFO", "trtllm")
    c = one("[TensorRT-LLM][INFO] Refreshed the MPI local session")
    assert c.text == "Refreshed the MPI local session"
    # sglang/docs-2025-09-mimo-mtp-eagle-ready.log
    d = one("W0902 12:01:32.507000 819883 torch/utils/cpp_extension.py:2425] TORCH_CUDA_ARCH_LIST is not set")
    assert d.level == "WARNING" and d.text.startswith("TORCH_CUDA_ARCH_LIST")


def test_traceback_frames_keep_their_indentation() -> None:
    line = one('  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1787, in run')
    assert line.text.startswith("  File")


def test_a_paste_indented_by_a_list_item_is_read_past_its_indentation() -> None:
    # localai/v1.24.1-langchain-chroma-example-docker-logs-fiber-banner-ready-dify-doc.log: a docs page's
    # numbered step indents the whole `docker logs` output by three spaces (markdown lists nest by two or three)
    a = one("   7:16AM INF Starting LocalAI using 4 threads, with models path: /models")
    assert (a.text, a.level, a.fmt) == (
        "Starting LocalAI using 4 threads, with models path: /models",
        "INFO",
        "zerolog",
    )
    b = one("  2025-07-08 11:20:26,869 - lmdeploy - WARNING - __init__.py:10 - Disable DLSlime Backend")
    assert (b.text, b.level) == ("Disable DLSlime Backend", "WARNING")


@given(st.text(max_size=300))
def test_normalizer_never_raises(text: str) -> None:
    for line in Normalizer(2025).lines(1, text):
        assert "\x1b[" not in line.raw or "\x1b" in text


def test_collector_wrappers_are_peeled_before_the_server_prefix() -> None:
    # docker compose, docker/kubectl --timestamps with CRI stream tags, journald: the rules see the message
    cases = {
        "sglang-1  | [2025-05-01 05:11:17] Load weight begin. avail mem=78.58 GB": ("sglang", None),
        "2025-01-02T10:00:00.123456789Z stdout F [2025-05-01 05:11:17 TP0] Load weight begin. avail mem=7 GB": (
            "sglang",
            "TP0",
        ),
        "2025-01-02T10:00:00.123Z INFO 08-12 10:11:12 [api_server.py:12] Load weight begin. avail mem=7 GB": (
            "vllm",
            None,
        ),
        "Jan 02 10:00:00 gpu1 vllm[123]: INFO 08-12 10:11:12 [api_server.py:12] Load weight begin. avail mem=7 GB": (
            "vllm",
            None,
        ),
    }
    for raw, (fmt, proc) in cases.items():
        line = one(raw)
        assert line.text.startswith("Load weight begin."), raw
        assert (line.fmt, line.proc) == (fmt, proc)
        assert line.t is not None


def test_tgi_stamp_is_not_taken_for_a_collector_wrapper() -> None:
    line = one("2025-07-04T12:35:02.586768Z  INFO text_generation_launcher: Starting shard rank=0")
    assert line.fmt == "rust_tracing" and line.text == "Starting shard rank=0"


def test_compose_wrapper_around_a_bare_message() -> None:
    line = one("vllm_1    | INFO:     Application startup complete.")
    assert line.text == "Application startup complete." and line.level == "INFO"


# vllm/nim-1.0-gke-l4-kubectl-json-lines-llama3-8b-ready.log: NIM logs one JSON record a line
NIM_READY = (
    '{"level": "INFO", "time": "02-20 21:47:39.338", "file_path": "/usr/local/lib/python3.10/dist-packages/uvicorn/'
    'lifespan/on.py", "line_number": "62", "message": "Application startup complete.", "exc_info": "None", '
    '"stack_info": "None"}'
)


def test_json_record_is_read_as_its_message_level_and_time() -> None:
    line = one(NIM_READY, 2026)
    assert line.text == "Application startup complete." and line.level == "INFO" and line.fmt == "json"
    assert line.t == 1771624059.0  # 2026-02-20 21:47:39 UTC: the record's yearless stamp gets the log's year
    # behind kubectl's --prefix as behind nothing
    assert one("[pod/nim-0/nim] " + NIM_READY, 2026).text == "Application startup complete."


def test_json_record_exception_becomes_traceback_lines(tmp_path) -> None:
    from bootwatch.pipeline import analyze_path

    record = (
        '{"level": "ERROR", "time": "02-20 21:47:20.001", "message": "Error in model execution", "exc_info": '
        '"Traceback (most recent call last):\\n  File \\"/usr/local/lib/python3.10/dist-packages/vllm/worker/'
        'model_runner.py\\", line 973, in capture\\n    raise RuntimeError(msg)\\nRuntimeError: CUDA error: out of '
        'memory", "stack_info": "None"}'
    )
    lines = Normalizer(2026).lines(3, record)
    assert [x.text for x in lines][0] == "Error in model execution"
    assert lines[-1].text == "RuntimeError: CUDA error: out of memory" and {x.no for x in lines} == {3}
    log = tmp_path / "nim.log"
    log.write_text(
        NIM_READY.replace("Application startup complete.", "NIM LLM API version 1.0.0") + "\n" + record + "\n"
    )
    s = analyze_path(log)
    assert s["verdict"] == "failed" and s["failure"]["text"] == "RuntimeError: CUDA error: out of memory", s


def test_tracing_json_record_keeps_its_message_under_fields() -> None:
    # tracing-subscriber's JSON (TGI --json-output): the message sits in "fields"
    line = one(
        '{"timestamp":"2024-06-17T13:11:09.417238Z","level":"WARN","fields":{"message":"Waiting for shard to be '
        'ready..."},"target":"text_generation_launcher"}'
    )
    assert line.text == "Waiting for shard to be ready..." and line.level == "WARNING"
    assert line.t == 1718629869.417238


def test_llama_cpp_json_is_left_to_its_rules() -> None:
    # llamacpp 2023 server JSON ("message" and the C++ function): llama.cpp's rules read the record whole
    raw = '{"timestamp":1688607679,"level":"INFO","function":"main","line":1085,"message":"build info","build":796}'
    assert one(raw).text == raw


def test_deeply_nested_json_line_is_text() -> None:
    raw = '{"a":' * 5000 + "1" + "}" * 5000
    assert one(raw).text == raw


def test_json_record_message_loses_its_colour_codes() -> None:
    line = one('{"level": "ERROR", "message": "\\u001b[31mRuntimeError: boom\\u001b[0m"}')
    assert line.text == "RuntimeError: boom" and line.level == "ERROR"


def test_json_record_levels_read_as_text_prefixes_read_them() -> None:
    # FATAL stays FATAL (the tracker reads FATAL lines as deaths), WARN becomes WARNING, as from a text prefix
    assert one('{"level": "fatal", "message": "engine lost"}').level == "FATAL"
    assert one('{"severity": "WARN", "message": "slow"}').level == "WARNING"


# The shortcuts of the hot path must give what the plain code gave, for any input.
@given(
    st.integers(min_value=-5, max_value=10000),
    st.integers(min_value=-2, max_value=14),
    st.integers(min_value=-2, max_value=40),
    st.integers(min_value=0, max_value=99),
    st.integers(min_value=0, max_value=99),
    st.integers(min_value=0, max_value=99),
)
def test_cached_day_epoch_equals_timegm(y: int, mo: int, d: int, h: int, mi: int, s: int) -> None:
    import calendar

    from bootwatch.lines.prefixes import _epoch

    try:
        want: float | None = float(calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)))
    except (ValueError, OverflowError):
        want = None
    assert _epoch(y, mo, d, h, mi, s) == want
    assert _epoch(y, mo, d, h, mi, s) == want  # and again, from the cache


_PLAIN_BAR_END = re.compile(r"\d+/\d+ \[(?:\d|\?)[^\[\]]*\]")


@given(st.lists(st.sampled_from(["a", "7", "/", "12 [", "?", "0", "]", "[", " ", "00:00<?"]), max_size=10).map("".join))
@example("a/1 [1]")
@example("1/2/3 [4]")
def test_bar_end_search_ends_where_the_plain_pattern_ends(text: str) -> None:
    from bootwatch.lines.normalize import _BAR_END

    plain, fast = _PLAIN_BAR_END.search(text), _BAR_END.search(text)
    if fast is not None and fast.group("rate") is not None:
        return  # the other bar's end (an indicatif rate), which the plain pattern does not know
    assert (plain is None) == (fast is None)
    if plain is not None and fast is not None:
        assert plain.end() == fast.end()


_WRAPPER_BITS = [
    "web-1  | ",
    "2025-01-02T10:00:00.123456789Z stdout F ",
    "2025-01-02T10:00:00+02:00 ",
    "Jan 02 10:00:00 host ollama[12]: ",
    "[2024-12-05 01:56:09] [stderr] ",
    "[stdout] ",
    ">>> ",
    "[pod/web/main] ",
    "2026-05-17 10:44:45.483 | ",
    "2025-02-04 21:21:33 ",
    "INFO 05-25 17:26:25 [loader.py:12] ",
    "[2025-05-25 17:26:25 TP0] ",
    "(EngineCore_DP0 pid=7) ",
    "x",
    " ",
]


@given(st.lists(st.sampled_from(_WRAPPER_BITS), max_size=5))
def test_wrapper_gate_lets_through_every_line_a_wrapper_pattern_matches(bits: list[str]) -> None:
    from bootwatch.lines import prefixes

    text = "".join(bits) + "message"
    each = [w.pattern for w in prefixes.TABLE.wrappers]
    if any(p.match(text) for p in each):
        assert prefixes._ANY_WRAP.match(text) is not None


def test_a_line_is_decoded_as_the_encoding_it_is_in() -> None:
    from bootwatch.sources.encoding import decode_line

    zh = "加载模型权重 第3部分 完成"
    assert decode_line(f"INFO loader.py:1] {zh}".encode("gbk")) == f"INFO loader.py:1] {zh}"
    assert decode_line("Modèle chargé — prêt".encode("cp1252")) == "Modèle chargé — prêt"
    assert decode_line(b"caf\xe9 \x81") == "caf\xe9 \x81"  # cp1252 leaves 0x81 unmapped: Latin-1 then
    cut = f"INFO {zh}".encode()[:-1]  # UTF-8 cut inside its last character: UTF-8 still, one U+FFFD
    assert decode_line(cut) == f"INFO {zh[:-1]}\ufffd"
