"""After ready: serving numbers read from real logs' stats lines, the summary's `serving` block, and the
detectors (capacity cut, queue at the cap, hang, low acceptance, preemptions, JIT dip)."""

from __future__ import annotations

import re
from pathlib import Path

from bootwatch.engines import load_rulebook
from bootwatch.lines import Normalizer
from bootwatch.pipeline import Analyzer, analyze_path
from bootwatch.serving.aggregate import _quantile
from bootwatch.serving.detectors import (
    Context,
    HangDetector,
    JitDipDetector,
    LowAcceptanceDetector,
    PreemptionDetector,
    SaturatedDetector,
)
from bootwatch.serving.scrape import Scrape, parse
from bootwatch.serving.stats import ServingSample, Source, from_groups
from bootwatch.tracker import ServingEvent, WarningEvent

from .conftest import CORPUS, FIXTURES

DFLASH = CORPUS / "sglang" / "v0.5.x-2026-08-gb10-laguna-int4-dflash-spec-cap48-ready-decode-batches.log"


def _read(engine: str, raw: str) -> ServingSample | None:
    """A real line through the engine's stats rules, as the tracker reads it."""
    book = load_rulebook()
    line = Normalizer(2025).lines(1, raw)[-1]
    for r in book.for_engine(engine)["stats"]:
        m = r.regex.search(line.text)
        if m and r.fields is not None:
            m = r.fields.search(line.raw)
        if m:
            return from_groups(r.name or "", {k: v for k, v in m.groupdict().items() if v}, line.t, 1, line.proc)
    return None


def test_stats_rules_read_the_numbers_of_real_lines() -> None:
    s = _read("sglang", DFLASH.read_bytes().decode().split("\n")[187])
    assert s is not None and (s.kind, s.running, s.queued, s.accept_len, s.accept_rate, s.gen_tps, s.kv_usage) == (
        "decode",
        1,
        0,
        2.75,
        0.12,
        0.10,
        0.0,
    )
    s = _read(
        "sglang",
        "[2026-01-14 12:10:06 DP19 TP19 EP19] Decode batch, #running-req: 26, #token: 100864, "
        "token usage: 0.80, accept len: 2.67, accept rate: 0.89, pre-allocated usage: 0.00, #prealloc-req: 0, "
        "#transfer-req: 0, #retracted-req: 0, npu graph: True, gen throughput (token/s): 593.30, #queue-req: 0, ",
    )
    assert s is not None and (s.running, s.kv_usage, s.accept_len, s.gen_tps, s.proc) == (26, 0.8, 2.67, 593.3, "TP19")
    s = _read(
        "vllm",
        "(APIServer pid=523647) INFO 04-27 15:10:24 [loggers.py:236] Engine 000: Avg prompt throughput: "
        "2414.0 tokens/s, Avg generation throughput: 145.5 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV "
        "cache usage: 5.5%, Prefix cache hit rate: 7.3%",
    )
    assert s is not None and (s.running, s.queued, s.gen_tps, s.prompt_tps, s.kv_usage) == (8, 0, 145.5, 2414.0, 0.055)
    s = _read(
        "vllm",
        "(APIServer pid=23283) INFO 08-01 21:24:09 [metrics.py:120] SpecDecoding metrics: Mean "
        "acceptance length: 3.62, Accepted throughput: 2.87 tokens/s, Drafted throughput: 16.42 tokens/s, "
        "Accepted: 76 tokens, Drafted: 435 tokens, Per-position acceptance rate: 0.5",
    )
    assert s is not None and (s.kind, s.accept_len, s.accepted, s.drafted) == ("spec", 3.62, 76, 435)
    s = _read(
        "llamacpp",
        "slot print_timing: id  0 | task 0 |        eval time =    3429.08 ms /    43 tokens "
        "(   79.75 ms per token,    12.54 tokens per second)",
    )
    assert s is not None and (s.kind, s.gen_tps) == ("timing", 12.54)
    s = _read(
        "llamacpp", "2026-05-14 22:40:29.046 | draft acceptance rate = 0.98260 ( 1186 accepted /  1207 generated)"
    )
    assert s is not None and (s.accept_rate, s.accepted, s.drafted) == (0.9826, 1186, 1207)
    tgi = [x for x in (FIXTURES / "real_lines" / "tgi.log").read_text("utf-8").splitlines() if x.endswith("Success")]
    s = _read("tgi", tgi[0])
    assert s is not None and s.kind == "success" and abs((s.gen_tps or 0) - 1 / 0.036708605) < 0.01


def _decode_numbers(path: Path) -> tuple[list[float], list[float]]:
    """Independently of the rules: throughput of busy decode lines and acceptance lengths after the ready line."""
    tps, acc, ready = [], [], False
    for line in path.read_bytes().decode().split("\n"):
        ready = ready or "The server is fired up and ready to roll!" in line
        m = re.search(
            r"Decode batch, #running-req: (\d+),.*?accept len: ([\d.]+),.*gen throughput \(token/s\): "
            r"([\d.]+)",
            line,
        )
        if ready and m:
            acc.append(float(m[2]))
            if int(m[1]) > 0:
                tps.append(float(m[3]))
    return tps, acc


def test_report_on_a_real_speculative_log_gives_the_serving_numbers() -> None:
    s = analyze_path(DFLASH)
    tps, acc = _decode_numbers(DFLASH)
    assert len(tps) == 56
    serving = s["serving"]
    assert serving["throughput_p50"] == round(_quantile(tps, 0.5), 2)
    assert serving["throughput_p90"] == round(_quantile(tps, 0.9), 2)
    assert serving["mean_accept_len"] == round(sum(acc) / len(acc), 3)
    assert serving["peak_running"] == 4 and serving["peak_queue"] == 0
    # The cap of 48 (SGLang's speculative default) is said at startup with its fix; never reached, so no
    # serving finding claims it was hit.
    cut = [w for w in s["warnings"] if w["kind"] == "max_running_requests_reduced"]
    assert cut and "--max-running-requests" in cut[0]["text"]
    assert "capacity_cut" not in serving["findings"]


def test_report_on_real_vllm_and_sglang_logs_has_a_serving_block() -> None:
    v = analyze_path(CORPUS / "vllm" / "v0.13-mistral7b-compile-cache-ready-serves-then-shutdown.log")
    assert v["serving"] is not None and v["serving"]["samples"]["log"] > 0 and v["serving"]["peak_running"] >= 1
    g = analyze_path(CORPUS / "sglang" / "v0.5x-2026-09-awq-qwen25-7b-no-cudagraph-ready-decode-batch-stats.log")
    assert g["serving"] is not None and g["serving"]["throughput_p50"] > 0
    # A log that never got ready has no serving block.
    assert analyze_path(CORPUS / "sglang" / "v0.5.16-gb10-nvfp4-capture-0of58-aborted.log")["serving"] is None


def test_capacity_cut_is_caught_at_the_first_decode_line_that_hits_the_cap() -> None:
    """The seed: speculative decoding silently lowered the cap to 48. The startup is the real DFLASH log up
    to its ready line; the load after it is made up in SGLang's own decode-line format (no public log shows the
    cap being hit): 40 running, then 48 with none waiting, then 48 with 12 waiting - the warning comes there."""
    lines = DFLASH.read_bytes().split(b"\n")
    ready = next(i for i, x in enumerate(lines) if b"fired up and ready to roll" in x)
    a = Analyzer()
    a.feed(b"\n".join(lines[: ready + 1]) + b"\n")
    fmt = (
        "[2026-08-02 00:10:0{s}] Decode batch, #running-req: {r}, #full token: 9000, full token usage: 0.05, "
        "#swa token: 900, swa token usage: 0.01, accept len: 2.80, accept rate: 0.13, cuda graph: True, "
        "gen throughput (token/s): 80.00, #queue-req: {q}\n"
    )
    events = []
    for s, (r, q) in enumerate([(40, 0), (48, 0), (48, 12), (48, 30)]):
        events.append(a.feed(fmt.format(s=s, r=r, q=q).encode()))
    assert not [e for e in events[0] + events[1] if e.kind == "warning"]
    cut = [e for e in events[2] if isinstance(e, WarningEvent) and e.warning == "capacity_cut"]
    assert cut and cut[0].line_no == ready + 4
    assert "48 requests running = the cap of 48 while 12 wait" in cut[0].details["evidence"]
    assert "speculative decoding (DFLASH)" in cut[0].details["evidence"]
    assert "--max-running-requests" in cut[0].details["fix"]
    assert list(cut[0].payload()) == ["line_no", "kind", "text", "evidence", "fix"]
    assert not [e for e in events[3] if e.kind == "warning"]  # said once
    assert [e for e in events[2] if isinstance(e, ServingEvent)][0].queued == 12
    assert "capacity_cut" in a.summary().to_json()["serving"]["findings"]


def _s(t: float, **kw: float) -> ServingSample:
    s = ServingSample(t, Source.LOG, str(kw.pop("kind", "decode")), line_no=int(t))
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def _ctx(engine: str = "sglang", **facts: object) -> Context:
    rules = load_rulebook().for_engine(engine)
    flag = rules.serving.concurrency_flag if rules.serving else ""
    return Context(engine, dict(facts), {}, rules.capacity, flag)


def test_hang_after_thirty_seconds_of_running_at_zero_throughput() -> None:
    d, ctx = HangDetector(), _ctx()
    assert d.observe(_s(0, running=3, gen_tps=0.0), ctx) is None
    assert d.observe(_s(20, running=3, gen_tps=0.0), ctx) is None
    f = d.observe(_s(31, running=3, gen_tps=0.0), ctx)
    assert f is not None and f.kind == "serving_hang" and "31 s" in f.evidence
    d2 = HangDetector()
    for t, tps in ((0, 0.0), (20, 5.0), (40, 0.0)):  # it generated in between: slow, not hung
        assert d2.observe(_s(t, running=3, gen_tps=tps), ctx) is None


def test_low_acceptance_names_the_drafter() -> None:
    d, ctx = LowAcceptanceDetector(), _ctx(draft_model="org/tiny-draft")
    found = [d.observe(_s(t, accept_len=1.05), ctx) for t in range(5)]
    assert found[:4] == [None] * 4 and found[4] is not None and "org/tiny-draft" in found[4].evidence
    d2 = LowAcceptanceDetector()
    assert all(d2.observe(_s(t, accept_len=2.7), ctx) is None for t in range(8))


def test_preemptions_climbing_from_a_cumulative_counter() -> None:
    d, ctx = PreemptionDetector(), _ctx("vllm")
    assert d.observe(_s(0, kind="interval", preemptions=0), ctx) is None
    assert d.observe(_s(1, kind="interval", preemptions=2), ctx) is None  # once: could be a burst
    assert d.observe(_s(2, kind="interval", preemptions=2), ctx) is None
    f = d.observe(_s(3, kind="interval", preemptions=5), ctx)
    assert f is not None and "5 requests preempted" in f.evidence and "--gpu-memory-utilization" in f.fix


def test_queue_growing_at_the_peak_without_a_known_cap() -> None:
    d, ctx = SaturatedDetector(), _ctx("vllm")
    seq = [(8, 0), (16, 2), (16, 5), (16, 9)]
    out = [d.observe(_s(t, running=r, queued=q, kv_usage=0.3), ctx) for t, (r, q) in enumerate(seq)]
    assert out[:3] == [None] * 3 and out[3] is not None and "--max-num-seqs" in out[3].fix
    d2 = SaturatedDetector()  # a queue that drains is not saturation
    assert all(d2.observe(_s(t, running=16, queued=q), ctx) is None for t, q in enumerate((9, 6, 3, 1)))


def test_jit_dip_is_tied_to_the_jit_line() -> None:
    d, ctx = JitDipDetector(), _ctx()
    ctx.throughputs.extend([100.0, 110.0, 95.0])
    assert d.observe(_s(1, running=2, gen_tps=20.0), ctx) is None  # a dip with no JIT line: not this finding
    assert d.observe(_s(2, kind="jit"), ctx) is None
    f = d.observe(_s(3, running=2, gen_tps=20.0), ctx)
    assert f is not None and "line 2" in f.evidence and "compile_deep_gemm" in f.fix


def test_scrape_turns_counters_into_rates_and_acceptance() -> None:
    page = (
        "# HELP vllm:num_requests_running r\n# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{{model_name="tiny"}} {r}\n'
        "# TYPE vllm:num_requests_waiting gauge\n"
        'vllm:num_requests_waiting{{model_name="tiny"}} 3.0\n'
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        'vllm:kv_cache_usage_perc{{model_name="tiny"}} 0.25\n'
        "# TYPE vllm:generation_tokens counter\n"
        'vllm:generation_tokens_total{{model_name="tiny"}} {g}\n'
        'vllm:generation_tokens_created{{model_name="tiny"}} 1.7e9\n'
        "# TYPE vllm:spec_decode_num_drafts counter\n"
        'vllm:spec_decode_num_drafts_total{{model_name="tiny"}} {d}\n'
        "# TYPE vllm:spec_decode_num_accepted_tokens counter\n"
        'vllm:spec_decode_num_accepted_tokens_total{{model_name="tiny"}} {a}\n'
        "# TYPE vllm:spec_decode_num_draft_tokens counter\n"
        'vllm:spec_decode_num_draft_tokens_total{{model_name="tiny"}} {dt}\n'
    )
    sc = Scrape("vllm", load_rulebook().for_engine("vllm").serving)
    first = sc.sample(parse(page.format(r=4, g=100, d=10, a=10, dt=30)), 10.0)
    assert first is not None and (first.running, first.queued, first.kv_usage, first.gen_tps) == (4, 3, 0.25, None)
    second = sc.sample(parse(page.format(r=4, g=300, d=30, a=40, dt=90)), 12.0)
    assert second is not None and second.gen_tps == 100.0
    assert second.accept_len == 2.5 and second.accept_rate == 0.5


def _judge(engine: str, **facts: object) -> dict[str, tuple[bool, str]]:
    from bootwatch.engines.capacity_judge import judge

    specs = load_rulebook().for_engine(engine).capacity
    return {c.kind: (c.cut, c.evidence) for c in judge(specs, dict(facts), {})}


def test_capacity_arithmetic_per_dp_rank_is_not_a_cut() -> None:
    # SGLang: with DP attention each rank runs max_running_requests // dp_size (model_runner.py).
    base = {"max_running_requests_args": 144, "dp_size": 4, "enable_dp_attention": True}
    assert _judge("sglang", **base, max_running_requests=36)["max_running_requests_reduced"][0] is False
    cut, text = _judge("sglang", **base, max_running_requests=30)["max_running_requests_reduced"]
    assert cut and "30 requests at once per rank (144 over dp_size 4), below the 36 asked" in text
    # Without DP attention dp_size replicates whole servers: nothing is divided.
    assert _judge("sglang", max_running_requests_args=144, dp_size=4, max_running_requests=36)[
        "max_running_requests_reduced"
    ][0]
    # llama.cpp: -c over -np slots, unless the KV cache is unified (-np auto).
    split = _judge("llamacpp", n_slots=8, n_ctx_slot=256, kv_unified="false")["context_split"][1]
    assert "each of the 8 slots gets 256 tokens (-c 2048 split over -np 8)" in split
    assert _judge("llamacpp", n_slots=4, n_ctx_slot=8192, kv_unified="true") == {}
    assert _judge("llamacpp", n_slots=4, n_ctx_slot=8192, n_ctx_train=8192) == {}  # the whole training context
    # vLLM's --max-model-len auto, shortened to fit the KV cache.
    cut, text = _judge("vllm", max_model_len_model=262144, max_model_len_fitted=150528)["max_model_len_reduced"]
    assert cut and "150528 tokens, below the model's 262144" in text
