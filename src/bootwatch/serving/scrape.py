"""A server's Prometheus /metrics, read every second once it is ready: the engine's own metric names become
the same `ServingSample` fields the log lines give. Parsed with prometheus_client's parser."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bootwatch.engines.capacity import ServingSpec
from bootwatch.serving.stats import ServingSample, Source
from bootwatch.tracker.events import Event

SCRAPE_S = 1.0
TIMEOUT_S = 5.0  # a busy server on few cores answers /metrics late; a reading late is still a reading
MAX_BODY = 4 << 20  # a /metrics page is tens of KiB; a proxy's error page or a stream is not read further


# A ratio is averaged over its series (one per engine or DP rank), a count is summed.
_MEAN = ("kv_usage", "accept_len")


def metrics_url(url: str) -> str:
    """The /metrics of the server a health or API URL points at."""
    p = urlsplit(url)
    return f"{p.scheme}://{p.netloc}/metrics"


def parse(text: str) -> dict[str, list[float]]:
    """Every sample's value by its name (counters keep their `_total`); `_created` timestamps left out."""
    out: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if not s.name.endswith("_created"):
                out.setdefault(s.name, []).append(float(s.value))
    return out


class Scrape:
    """Readings of one server's /metrics, by the names its engine file's `[serving.metrics]` gives;
    throughput and acceptance come from counter deltas."""

    def __init__(self, engine: str, names: ServingSpec | None) -> None:
        self.engine = engine
        self.names = names
        self._prev: tuple[float, dict[str, float]] | None = None  # (when, counter values)

    def sample(self, values: dict[str, list[float]], now: float) -> ServingSample | None:
        names = self.names
        if names is None or not names.metrics:
            return None

        def get(field: str) -> float | None:
            for n in names.names(field):
                if n in values:
                    vals = values[n]
                    return sum(vals) / len(vals) if field in _MEAN else sum(vals)
            return None

        s = ServingSample(now, Source.METRICS, "scrape")
        running, queued = get("running"), get("queued")
        s.running = int(running) if running is not None else None
        s.queued = int(queued) if queued is not None else None
        s.kv_usage, s.gen_tps, s.accept_len = get("kv_usage"), get("gen_tps"), get("accept_len")
        counters = {
            f: v for f in ("gen_tokens", "accepted", "drafted", "drafts", "preemptions") if (v := get(f)) is not None
        }
        if "preemptions" in counters:
            s.preemptions = int(counters["preemptions"])
        if self._prev is not None:
            then, old = self._prev
            dt = now - then

            def delta(f: str) -> float | None:
                return counters[f] - old[f] if f in counters and f in old and counters[f] >= old[f] else None

            if s.gen_tps is None and dt > 0 and (d := delta("gen_tokens")) is not None:
                s.gen_tps = d / dt
            acc, drafted, drafts = delta("accepted"), delta("drafted"), delta("drafts")
            if acc is not None and drafts:
                s.accept_len = 1 + acc / drafts  # vLLM's convention: the bonus token counts
            if acc is not None and drafted:
                s.accept_rate = acc / drafted
                s.accepted, s.drafted = int(acc), int(drafted)
        self._prev = (now, counters)
        if s.running is None and s.queued is None and s.gen_tps is None:
            return None  # not this engine's metrics (yet): nothing to say
        return s


async def fetch(client: httpx.AsyncClient, url: str) -> str | None:
    """The page, or None when the server does not serve it (no --metrics / --enable-metrics) or is gone."""
    try:
        async with client.stream("GET", url, timeout=TIMEOUT_S) as r:
            if r.status_code != 200:
                return None
            body = b""
            async for chunk in r.aiter_bytes():
                body += chunk
                if len(body) > MAX_BODY:
                    return None
            return body.decode("utf-8", "replace")
    except httpx.HTTPError:
        return None


async def server_info_cap(client: httpx.AsyncClient, url: str) -> int | None:
    """SGLang's /get_server_info `max_running_requests` (it may differ from what the scheduler runs)."""
    p = urlsplit(url)
    for path in ("/get_server_info", "/server_info"):
        try:
            r = await client.get(f"{p.scheme}://{p.netloc}{path}", timeout=TIMEOUT_S)
        except httpx.HTTPError:
            return None
        if r.status_code == 200:
            with contextlib.suppress(ValueError, AttributeError):
                v = r.json().get("max_running_requests")
                return v if isinstance(v, int) and not isinstance(v, bool) else None
            return None
    return None


async def follow_metrics(
    url: str, tracker: Any, emit: Callable[[list[Event]], None], interval_s: float = SCRAPE_S
) -> None:
    """Scrape `url`'s /metrics every interval while the task lives (the session cancels it) and hand the
    readings to the tracker's ServingTracker; a server without /metrics is asked again, quietly."""
    murl = metrics_url(url)
    scrapes: dict[str, Scrape] = {}
    asked_info = False
    async with httpx.AsyncClient(follow_redirects=False, trust_env=False) as client:
        while True:
            started = time.monotonic()
            launch = tracker.launch
            if launch is not None and launch.ready is not None:
                if not asked_info and launch.engine == "sglang":
                    asked_info = True
                    cap = await server_info_cap(client, url)
                    if cap is not None:
                        launch.facts["max_running_requests_info"] = cap
                text = await fetch(client, murl)
                if text is not None:
                    with contextlib.suppress(ValueError):  # a page that is not exposition format
                        scrape = scrapes.setdefault(launch.engine, Scrape(launch.engine, launch.rules.serving))
                        s = scrape.sample(parse(text), time.time())
                        if s is not None:
                            emit(tracker.serving.feed_sample(launch, s))
            await asyncio.sleep(max(0.05, interval_s - (time.monotonic() - started)))
