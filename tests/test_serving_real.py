"""Following real servers after ready: a bounded load from the test (loopback, a fixed number of requests)
and the numbers bootwatch reads from the log and from /metrics."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import time
from typing import Any

import httpx
import pytest

from .test_real_servers import BOOTWATCH, free_port, llama_cmd, vllm_cmd

pytestmark = [pytest.mark.real_server, pytest.mark.slow]


async def _load(url: str, body: dict[str, Any], n: int) -> list[int]:
    """n completions at once; the tokens each generated."""
    async with httpx.AsyncClient(trust_env=False, timeout=120) as c:
        rs = await asyncio.gather(*(c.post(url, json=body) for _ in range(n)))
    for r in rs:
        r.raise_for_status()
    return [r.json().get("usage", {}).get("completion_tokens", 0) for r in rs]


def _follow(cmd: list[str], load: Any, settle_s: float = 4.0) -> list[dict]:
    """bootwatch run (plain mode keeps following) in JSON; once ready, the load; then Ctrl-C."""
    p = subprocess.Popen([*BOOTWATCH, "run", "--timeout", "240", "--json", *cmd], stdout=subprocess.PIPE, text=True)
    events: list[dict] = []
    try:
        assert p.stdout is not None
        for line in p.stdout:
            events.append(json.loads(line))
            if events[-1]["event"] == "ready":
                break
        assert events and events[-1]["event"] == "ready", events[-3:]
        load()
        time.sleep(settle_s)
    finally:
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=60)
    events += [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    return events


def test_vllm_under_load_log_and_metrics_agree() -> None:
    # On 2 loaded cores vLLM's frontend now and then answers nothing (log stats, /metrics) for a whole burst;
    # one more burst on a fresh server is allowed before this counts as a failure.
    try:
        _vllm_under_load()
    except AssertionError:
        _vllm_under_load()


def _vllm_under_load() -> None:
    port = free_port()
    cmd = [
        "--log",
        f"/tmp/bw-serving-vllm-{port}.log",
        "--url",
        f"http://127.0.0.1:{port}/health",
        "--",
        *vllm_cmd(port, args=("--max-num-seqs", "2"), env=("VLLM_LOG_STATS_INTERVAL=1",)),
    ]
    # ~15 s of generation on the tiny model (its context is 2048): the busy API server answers
    # /metrics late, so the load lasts long enough for several scrapes to land during it.
    n, length = 8, 2000
    body = {"model": "tiny", "prompt": "hello", "max_tokens": length, "ignore_eos": True, "temperature": 0}
    tokens: list[int] = []
    events = _follow(cmd, lambda: tokens.extend(asyncio.run(_load(f"http://127.0.0.1:{port}/v1/completions", body, n))))
    assert sum(tokens) == n * length
    serving = [e for e in events if e["event"] == "serving"]
    log = [e for e in serving if e["source"] == "log"]
    met = [e for e in serving if e["source"] == "metrics"]
    assert log and met, (len(log), len(met))
    # --max-num-seqs 2 with 8 requests at once: the log sees 2 running and requests waiting.
    assert max(e["running"] for e in log) == 2 and max(e["queued"] for e in log) > 0
    # On 2 cores the engine starves vLLM's own frontend while it generates: /metrics (and the log's stats
    # line) are often answered only once a burst is over. What /metrics saw never exceeds the cap, and its
    # counters give the same throughput as the log, to within what windows that do not line up allow.
    # When a scrape before the burst gives its counters a baseline, they agree with the log's throughput.
    assert max(e["running"] for e in met) <= 2
    peak_log, peak_met = max(e["gen_tps"] or 0 for e in log), max(e["gen_tps"] or 0 for e in met)
    assert peak_log > 0
    if peak_met > 0:
        assert 0.4 < peak_log / peak_met < 2.5, (peak_log, peak_met)
    s = events[-1]
    assert s["event"] == "summary" and s["verdict"] == "ready"
    assert s["serving"]["samples"]["log"] > 0 and s["serving"]["samples"]["metrics"] > 0
    assert s["serving"]["peak_running"] == 2 and s["serving"]["peak_queue"] > 0


def test_llama_server_slot_timings_and_metrics() -> None:
    port = free_port()
    cmd = [
        "--log",
        f"/tmp/bw-serving-llama-{port}.log",
        "--url",
        f"http://127.0.0.1:{port}/health",
        "--",
        *llama_cmd(port, ctx="2048"),
        "--metrics",
        "-np",
        "2",
    ]
    n = 6
    body = {"prompt": "hello", "n_predict": 48, "ignore_eos": True, "temperature": 0}
    events = _follow(cmd, lambda: asyncio.run(_load(f"http://127.0.0.1:{port}/completion", body, n)))
    serving = [e for e in events if e["event"] == "serving"]
    timings = [e for e in serving if e["source"] == "log" and e["reading"] == "timing"]
    met = [e for e in serving if e["source"] == "metrics"]
    assert timings and all(e["gen_tps"] > 0 for e in timings)
    assert met and max(e["running"] or 0 for e in met) <= 2
    s = events[-1]["serving"]
    assert s["throughput_from"] == "log" and s["throughput_p50"] > 0
    assert s["samples"]["log"] == n  # one slot-timing line per finished request


async def _post_all(url: str, bodies: list[dict[str, Any]]) -> list[int]:
    """The bodies posted at once; their status codes (refusals are what these tests are after)."""
    async with httpx.AsyncClient(trust_env=False, timeout=120) as c:
        rs = await asyncio.gather(*(c.post(url, json=b) for b in bodies))
    return [r.status_code for r in rs]


def _warnings(events: list[dict]) -> dict[str, dict]:
    return {e["kind"]: e for e in events if e["event"] == "warning"}


def test_llama_server_context_split_over_slots_is_said_at_startup_and_at_the_refusals() -> None:
    """-c 2048 -np 8: each slot gets 256 tokens. Said at startup; four 600-token prompts are refused
    (`send_error: ... exceeds the available context size (256 tokens)`) and that is said with the fix."""
    port = free_port()
    cmd = [
        "--log",
        f"/tmp/bw-serving-llama-split-{port}.log",
        "--url",
        f"http://127.0.0.1:{port}/health",
        "--",
        *llama_cmd(port, ctx="2048"),
        "-np",
        "8",
    ]
    long = {"prompt": " ".join(["hello world"] * 300), "n_predict": 8, "temperature": 0}
    codes: list[int] = []
    url = f"http://127.0.0.1:{port}/completion"
    events = _follow(cmd, lambda: codes.extend(asyncio.run(_post_all(url, [long] * 4))))
    assert codes == [400] * 4
    ready = next(i for i, e in enumerate(events) if e["event"] == "ready")
    w = _warnings(events)
    split = w["context_split"]
    assert events.index(split) < ready  # at startup, before any request
    assert "each of the 8 slots gets 256 tokens (-c 2048 split over -np 8)" in split["text"]
    refused = w["requests_failed"]
    assert events.index(refused) > ready
    assert re.match(r"[34] of [34] requests", refused["evidence"])  # said once they pile up, not per request
    assert "exceeded the 256-token slot context" in refused["evidence"]
    assert "raise -c or lower -np" in refused["fix"]
    s = events[-1]
    assert s["event"] == "summary" and s["verdict"] == "ready"
    assert s["serving"]["requests"]["by_cause"] == {"context_exceeded": 4}


def test_vllm_prompt_beyond_max_model_len_is_a_request_error_finding() -> None:
    """vLLM CPU with --max-model-len 512: four longer prompts answered 400 (vLLM 0.32 logs only the access
    line); bootwatch says so once they pile up, names the fix, and lists them in the summary."""
    port = free_port()
    cmd = [
        "--log",
        f"/tmp/bw-serving-vllm-long-{port}.log",
        "--url",
        f"http://127.0.0.1:{port}/health",
        "--",
        *vllm_cmd(port, args=("--max-model-len", "512")),
    ]
    long = {"model": "tiny", "prompt": " ".join(["hello world"] * 400), "max_tokens": 8}
    codes: list[int] = []
    url = f"http://127.0.0.1:{port}/v1/completions"
    events = _follow(cmd, lambda: codes.extend(asyncio.run(_post_all(url, [long] * 4))))
    assert codes == [400] * 4
    refused = _warnings(events)["requests_failed"]
    assert "refused with HTTP 400 (/v1/completions)" in refused["evidence"]
    assert "--max-model-len" in refused["fix"] and "512 tokens" in refused["fix"]
    s = events[-1]
    assert s["event"] == "summary" and s["verdict"] == "ready"
    assert s["serving"]["requests"]["by_cause"] == {"HTTP 400": 4}
    assert s["serving"]["requests"]["status"] == {"400": 4}
