"""What is wrong with a serving server, from its samples and its startup facts: each detector is a small
class that looks at one sample at a time and says, at most once, what it found, why, and what fixes it."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from statistics import median
from typing import Any, Protocol

from bootwatch.serving.stats import ServingSample

# SGLang lowers an unset max_running_requests to 48 for speculative decoding; a cap this low with a drafter on
# is that default (or a hand-set value as small), not what the KV cache could hold.
SPEC_CAP = 64
HANG_S = 30.0  # requests running and nothing generated for this long: a hang, not a slow batch
LOW_ACCEPT_LEN = 1.3  # mean tokens per verification step, bonus token included: 1.0 means no draft is accepted
LOW_ACCEPT_RATE = 0.1  # llama.cpp reports only the rate
ACCEPT_WINDOW = 5  # readings averaged before judging the drafter
SATURATED_STREAK = 3  # readings pinned at the peak with a growing queue
JIT_DIP = 0.5  # throughput below this share of the median so far, after a JIT line, is the JIT's cost


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str
    evidence: str
    fix: str
    line_no: int | None
    t: float | None

    def to_warning(self) -> dict[str, Any]:
        return {
            "line_no": self.line_no,
            "kind": self.kind,
            "text": f"{self.evidence}. Fix: {self.fix}",
            "evidence": self.evidence,
            "fix": self.fix,
        }


@dataclass
class Context:
    """What the detectors know beyond the sample: the engine, its startup facts, throughput so far."""

    engine: str
    facts: dict[str, Any]
    fact_lines: dict[str, int]
    throughputs: deque[float] = field(default_factory=lambda: deque(maxlen=300))

    def typical_tps(self) -> float | None:
        return median(self.throughputs) if len(self.throughputs) >= 3 else None


class Detector(Protocol):
    kind: str

    def observe(self, s: ServingSample, ctx: Context) -> Finding | None: ...


def _at(s: ServingSample) -> str:
    return f" (line {s.line_no})" if s.line_no is not None else " (/metrics)"


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass(frozen=True, slots=True)
class Cut:
    """The engine runs fewer requests at once than it was asked to, and why."""

    effective: int
    requested: str  # what was asked, in words
    why: str
    fix: str


def capacity_cut(ctx: Context) -> Cut | None:
    f, lines = ctx.facts, ctx.fact_lines

    def where(name: str) -> str:
        return f" (line {lines[name]})" if name in lines else ""

    eff = _int(f.get("max_running_requests"))
    req = _int(f.get("max_running_requests_args"))
    state_cap = _int(f.get("max_running_requests_state_cap"))
    spec_default = _int(f.get("max_running_requests_spec_default"))
    spec = f.get("speculative_algorithm")
    if state_cap is not None:
        return Cut(
            min(state_cap, eff or state_cap),
            f"{req}" if req else "more",
            f"the mamba state cache caps it to {state_cap}{where('max_running_requests_state_cap')}",
            "raise --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state with "
            "--mamba-ssm-dtype bfloat16",
        )
    if spec_default is not None:
        return Cut(
            eff or spec_default,
            "no explicit value (the KV cache would size it)",
            f"SGLang reset it to {spec_default} because speculative decoding ({spec or 'on'}) is on"
            f"{where('max_running_requests_spec_default')}",
            "pass --max-running-requests explicitly (SGLang lowers it only when unset); size it from the "
            "KV cache line (max_total_num_tokens / tokens per request)",
        )
    if eff is not None and req is not None and eff < req:
        return Cut(
            eff,
            str(req),
            f"the scheduler runs {eff}{where('max_running_requests')}: the KV cache or the "
            "request pool cannot hold more",
            "give the KV cache more memory (--mem-fraction-static) or shorten --context-length, or ask for "
            f"--max-running-requests {eff} so the cap is visible",
        )
    if eff is not None and isinstance(spec, str) and spec and eff <= SPEC_CAP:
        return Cut(
            eff,
            "no explicit value",
            f"speculative decoding ({spec}) is on and the cap is only {eff}{where('max_running_requests')}",
            "pass --max-running-requests explicitly",
        )
    return None


class CapacityCutDetector:
    """The seed's case: asked for many, the engine silently runs few; caught at the first reading that shows
    the cap being hit (running at the cap while requests wait)."""

    kind = "capacity_cut"

    def observe(self, s: ServingSample, ctx: Context) -> Finding | None:
        if s.running is None or not s.queued:
            return None
        cut = capacity_cut(ctx)
        if cut is None or s.running < cut.effective:
            return None
        return Finding(
            self.kind,
            f"{s.running} requests running = the cap of {cut.effective} while {s.queued} "
            f"wait{_at(s)}; asked: {cut.requested}; {cut.why}",
            cut.fix,
            s.line_no,
            s.t,
        )


class InfoDisagreesDetector:
    """The server's info endpoint says one cap, its log another (sglang#38846: /get_server_info keeps the CLI
    value)."""

    kind = "config_disagrees"

    def observe(self, s: ServingSample, ctx: Context) -> Finding | None:
        info = _int(ctx.facts.get("max_running_requests_info"))
        if info is None:  # only a live watch that read the info endpoint has it: every other reading stops here
            return None
        log = _int(ctx.facts.get("max_running_requests"))
        state_cap = _int(ctx.facts.get("max_running_requests_state_cap"))
        eff = min(x for x in (log, state_cap) if x is not None) if (log or state_cap) else None
        if info is None or eff is None or info == eff:
            return None
        line = ctx.fact_lines.get("max_running_requests_state_cap", ctx.fact_lines.get("max_running_requests"))
        return Finding(
            self.kind,
            f"/get_server_info reports max_running_requests={info} but the log says the "
            f"scheduler runs {eff} (line {line}): clients sizing concurrency from the endpoint "
            "overload the queue",
            "trust the log's value; set --max-running-requests to what fits",
            line,
            s.t,
        )


class SaturatedDetector:
    """Running pinned at its peak while the queue grows, with no known cut: the server admits no more."""

    kind = "queue_at_cap"

    def __init__(self) -> None:
        self.peak = 0
        self.streak: list[ServingSample] = []

    def observe(self, s: ServingSample, ctx: Context) -> Finding | None:
        if s.running is None or s.queued is None:
            return None
        if s.running > self.peak:
            self.peak, self.streak = s.running, []
        if s.running < self.peak or s.queued == 0 or s.running == 0:
            self.streak = []
            return None
        self.streak.append(s)
        first = self.streak[0]
        if len(self.streak) < SATURATED_STREAK or s.queued <= (first.queued or 0) or capacity_cut(ctx):
            return None
        kv = f", KV cache {s.kv_usage:.0%} used" if s.kv_usage is not None else ""
        knob = (
            "--max-num-seqs"
            if ctx.engine == "vllm"
            else "--max-running-requests"
            if ctx.engine == "sglang"
            else "--parallel"
            if ctx.engine == "llamacpp"
            else "the engine's concurrency limit"
        )
        room = (
            "raise " + knob + " (the KV cache has room)"
            if s.kv_usage is not None and s.kv_usage < 0.8
            else "add replicas or memory for the KV cache (it is nearly full)"
        )
        return Finding(
            self.kind,
            f"{s.running} running for {len(self.streak)} readings while the queue grew from "
            f"{first.queued} to {s.queued}{kv}{_at(s)}",
            room,
            s.line_no,
            s.t,
        )


class HangDetector:
    """Requests running and no token generated for HANG_S: stuck, not slow."""

    kind = "serving_hang"

    def __init__(self, hang_s: float = HANG_S) -> None:
        self.hang_s = hang_s
        self.since: ServingSample | None = None

    def observe(self, s: ServingSample, ctx: Context) -> Finding | None:
        if s.gen_tps is None or s.running is None or s.kind in ("timing", "success"):
            return None
        if s.running == 0 or s.gen_tps > 0:
            self.since = None
            return None
        if self.since is None:
            self.since = s
            return None
        if s.t is None or self.since.t is None or s.t - self.since.t < self.hang_s:
            return None
        return Finding(
            self.kind,
            f"{s.running} requests running at 0 tokens/s for {s.t - self.since.t:.0f} s (since{_at(self.since)[1:]}",
            "a rank or collective is stuck: dump the workers' stacks (py-spy dump --pid) and restart; "
            "check the other ranks' logs for an error",
            s.line_no,
            s.t,
        )


class LowAcceptanceDetector:
    """Speculative decoding whose drafter is rarely right costs more than it saves."""

    kind = "low_acceptance"

    def __init__(self) -> None:
        self.lens: deque[float] = deque(maxlen=ACCEPT_WINDOW)
        self.rates: deque[float] = deque(maxlen=ACCEPT_WINDOW)

    def observe(self, s: ServingSample, ctx: Context) -> Finding | None:
        if s.accept_len is not None:
            self.lens.append(s.accept_len)
        elif s.accept_rate is not None:
            self.rates.append(s.accept_rate)
        else:
            return None
        drafter = ctx.facts.get("draft_model")
        who = f" for the drafter {drafter}" if drafter else ""
        fix = (
            "check that the draft model matches the target (same tokenizer, a draft trained for this model and "
            "quantization), or turn speculative decoding off: it costs throughput now"
        )
        if len(self.lens) == ACCEPT_WINDOW and (m := sum(self.lens) / len(self.lens)) < LOW_ACCEPT_LEN:
            return Finding(
                self.kind,
                f"mean acceptance length {m:.2f} over the last {ACCEPT_WINDOW} readings{who} "
                f"(1.0 = every draft token rejected){_at(s)}",
                fix,
                s.line_no,
                s.t,
            )
        if len(self.rates) == ACCEPT_WINDOW and (r := sum(self.rates) / len(self.rates)) < LOW_ACCEPT_RATE:
            return Finding(
                self.kind,
                f"draft acceptance rate {r:.0%} over the last {ACCEPT_WINDOW} readings{who}{_at(s)}",
                fix,
                s.line_no,
                s.t,
            )
        return None


class PreemptionDetector:
    """Preemptions (vLLM) or retractions (SGLang) that keep coming: the KV cache is too small for the load and
    work is thrown away and recomputed."""

    kind = "preemptions"

    def __init__(self) -> None:
        self.last: int | None = None
        self.rises = 0
        self.total = 0

    def observe(self, s: ServingSample, ctx: Context) -> Finding | None:
        if s.preemptions is None:
            return None
        if s.kind == "retract" or (s.kind == "decode" and ctx.engine == "sglang"):
            # SGLang counts per event (retract lines) or per batch (#retracted-req): each nonzero one is a rise
            new = s.preemptions if s.kind == "retract" else 0
        else:
            new = s.preemptions - self.last if self.last is not None and s.preemptions > self.last else 0
            if self.last is None and s.preemptions > 0:
                new = s.preemptions
            self.last = s.preemptions
        if new <= 0:
            return None
        self.rises += 1
        self.total += new
        if self.rises < 2:
            return None
        fix = (
            "raise --mem-fraction-static, or --schedule-conservativeness (e.g. 1.3) so fewer requests are "
            "admitted than can finish"
            if ctx.engine == "sglang"
            else "raise --gpu-memory-utilization, or lower --max-num-seqs / --max-model-len so the running requests fit"
        )
        return Finding(
            self.kind,
            f"{self.total} requests preempted in {self.rises} readings, still climbing{_at(s)}",
            fix,
            s.line_no,
            s.t,
        )


class JitDipDetector:
    """Kernels compiled on first use while serving: the throughput dips around it. Said at the first reading
    after the JIT line whose throughput is well below the usual, or at the JIT line itself when it is later
    than the first minute of readings."""

    kind = "jit_while_serving"

    def __init__(self) -> None:
        self.jit: ServingSample | None = None

    def observe(self, s: ServingSample, ctx: Context) -> Finding | None:
        if s.kind == "jit":
            self.jit = self.jit or s
            return None
        if self.jit is None or s.gen_tps is None or not s.running:
            return None
        typical = ctx.typical_tps()
        if typical is None or s.gen_tps >= JIT_DIP * typical:
            return None
        fix = (
            "compile before serving: SGLang `python -m sglang.compile_deep_gemm` with the server's arguments, "
            "and keep the flashinfer JIT cache between runs"
            if ctx.engine == "sglang"
            else "keep VLLM_CACHE_ROOT (the torch.compile cache) between runs, and list the batch sizes the load "
            "uses in compilation_config so they compile at startup"
            if ctx.engine == "vllm"
            else "warm the server up with the load's shapes before taking traffic"
        )
        return Finding(
            self.kind,
            f"throughput fell to {s.gen_tps:.1f} tokens/s (usually {typical:.1f}){_at(s)} "
            f"while kernels were compiled on first use{_at(self.jit)}",
            fix,
            s.line_no,
            s.t,
        )


def all_detectors(hang_s: float = HANG_S) -> list[Detector]:
    return [
        CapacityCutDetector(),
        InfoDisagreesDetector(),
        SaturatedDetector(),
        HangDetector(hang_s),
        LowAcceptanceDetector(),
        PreemptionDetector(),
        JitDipDetector(),
    ]
