"""What is wrong with a serving server, from its samples and its startup facts: each detector is a small
class that looks at one sample at a time and says, at most once, what it found, why, and what fixes it."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from statistics import median
from typing import Any, Protocol

from bootwatch.engines.capacity import CapacitySpec
from bootwatch.engines.capacity_judge import Cap, judge
from bootwatch.serving.stats import ServingSample

HANG_S = 30.0  # requests running and nothing generated for this long: a hang, not a slow batch
LOW_ACCEPT_LEN = 1.3  # mean tokens per verification step, bonus token included: 1.0 means no draft is accepted
LOW_ACCEPT_RATE = 0.1  # llama.cpp reports only the rate
ACCEPT_WINDOW = 5  # readings averaged before judging the drafter
SATURATED_STREAK = 3  # readings pinned at the peak with a growing queue
SURGE_N = 3  # refused or failed requests of one cause, at least ...
SURGE_SHARE = 0.5  # ... this share of the requests seen ...
SURGE_S = 300.0  # ... within this long (the log's clock): a pattern, not one bad request among many good ones
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
    capacity: list[CapacitySpec] = field(default_factory=list)  # the engine's [[capacity]] tables
    concurrency_flag: str = ""  # the flag that sets how many requests run at once (its [serving] table)
    throughputs: deque[float] = field(default_factory=lambda: deque(maxlen=300))
    _caps_for: tuple[Any, ...] | None = field(default=None, repr=False)
    _caps: list[Cap] = field(default_factory=list, repr=False)

    def caps(self) -> list[Cap]:
        """The capacity judgement of the facts as they stand. Judged again only when a fact changed: a serving
        server gives a reading every few decode steps, and judging (templates filled) cost a fifth of reading one."""
        key = (tuple(self.facts.items()), tuple(self.fact_lines.items()))
        if key != self._caps_for:
            self._caps_for, self._caps = key, judge(self.capacity, self.facts, self.fact_lines)
        return self._caps

    def typical_tps(self) -> float | None:
        return median(self.throughputs) if len(self.throughputs) >= 3 else None


class Detector(Protocol):
    kind: str

    def observe(self, s: ServingSample, ctx: Context) -> Finding | None: ...


def _at(s: ServingSample) -> str:
    return f" (line {s.line_no})" if s.line_no is not None else " (/metrics)"


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def capacity_cut(ctx: Context) -> Cap | None:
    """The engine's lowered concurrency cap, when its facts show one (asked above what runs after the engine's
    own arithmetic, or the engine's own line saying why it is lower)."""
    return next((c for c in ctx.caps() if c.lowered and c.kind != "context_split"), None)


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
            f"{s.running} requests running = the cap of {cut.effective} while {s.queued} wait{_at(s)}; {cut.evidence}",
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
        shown, per_rank = info, ""
        if ctx.facts.get("enable_dp_attention") is True and (dp := _int(ctx.facts.get("dp_size"))) and dp > 1:
            info //= dp  # the endpoint keeps the flag's value; each DP rank runs its share of it
            per_rank = f" ({info} per DP rank over dp {dp})"
        if eff is None or info == eff:
            return None
        line = ctx.fact_lines.get("max_running_requests_state_cap", ctx.fact_lines.get("max_running_requests"))
        return Finding(
            self.kind,
            f"/get_server_info reports max_running_requests={shown}{per_rank} but the log says the "
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
        asked = next((c.expected for c in ctx.caps() if c.expected), None)
        if s.running < self.peak or s.queued == 0 or s.running == 0 or (asked is not None and s.running >= asked):
            # at the cap that was asked for (per DP rank where it is divided) requests wait by the user's choice
            self.streak = []
            return None
        self.streak.append(s)
        first = self.streak[0]
        if len(self.streak) < SATURATED_STREAK or s.queued <= (first.queued or 0) or capacity_cut(ctx):
            return None
        kv = f", KV cache {s.kv_usage:.0%} used" if s.kv_usage is not None else ""
        knob = ctx.concurrency_flag or "the engine's concurrency limit"
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


class RequestFailureDetector:
    """Requests refused or failed after ready, SURGE_N of one cause within SURGE_S: the engine's request-error
    lines name the cause (and their rule the fix); access lines' 4xx/5xx stand in where the engine prints none."""

    kind = "requests_failed"

    def __init__(self, n: int = SURGE_N, window_s: float = SURGE_S) -> None:
        self.n, self.window_s = n, window_s
        self.outcomes: deque[tuple[float | None, ServingSample]] = deque(maxlen=10_000)  # (when, outcome)
        self.now: float | None = None  # a line without a time of its own is as late as the last one with one

    def observe(self, s: ServingSample, ctx: Context) -> Finding | None:
        if s.kind not in ("request", "timing", "success"):
            return None
        self.now = s.t if s.t is not None else self.now
        self.outcomes.append((self.now, s))
        if self.now is not None:
            while self.outcomes and (t0 := self.outcomes[0][0]) is not None and self.now - t0 > self.window_s:
                self.outcomes.popleft()
        if s.cause is None:
            return None
        same = [x for _, x in self.outcomes if x.cause == s.cause and (x.status is None) == (s.status is None)]
        if len(same) < self.n:
            return None
        access = sum(1 for _, x in self.outcomes if x.status is not None)
        other = sum(1 for _, x in self.outcomes if x.status is None)
        seen = max(access, other, len(same))
        if len(same) < SURGE_SHARE * seen:
            return None
        first = next(w for w, x in self.outcomes if x is same[0])
        span = self.now - first if self.now is not None and first is not None else None
        within = f" in {span:.0f} s" if span is not None else ""
        what = s.said or f"failed with {s.cause}" + (f" ({s.path})" if s.path else "")
        fix = s.fix or (
            "the server refused the requests as sent: the response body says why"
            if s.status is not None and s.status < 500
            else "the server failed the requests: read the lines before them for the error"
        )
        return Finding(
            self.kind,
            f"{len(same)} of {seen} requests{within} {what} (lines {same[0].line_no}-{s.line_no})",
            fix,
            s.line_no,
            s.t,
        )


def all_detectors(hang_s: float = HANG_S) -> list[Detector]:
    return [
        RequestFailureDetector(),
        CapacityCutDetector(),
        InfoDisagreesDetector(),
        SaturatedDetector(),
        HangDetector(hang_s),
        LowAcceptanceDetector(),
        PreemptionDetector(),
        JitDipDetector(),
    ]
