"""Poll a health URL while the server starts: refused and 503 are normal, 200 from the right process is up.

A port can answer from another process (whatever held it before the server): a 404 or any answer from a
process outside the server's tree is not this server.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import psutil


@dataclass
class ProbeResult:
    state: str  # down | loading | up | foreign | error
    status: int | None = None
    detail: str = ""
    t: float = 0.0


def listener_pids(port: int) -> set[int]:
    pids = set()
    try:
        for c in psutil.net_connections(kind="tcp"):
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
                pids.add(c.pid)
    except (psutil.Error, OSError):
        pass
    return pids


class HttpProbe:
    def __init__(self, url: str, attempt_timeout_s: float = 2.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            from bootwatch.errors import UsageError

            raise UsageError(f"bad --url {url!r}: expected http://host:port/path")
        # A bare host:port names the server, not a page: its engine's health path is asked, "/health" until the
        # engine is known (most have it; Ollama answers on "/" and says so in its rule file).
        self.bare = parts.path in ("", "/")
        self.url = url.rstrip("/") + "/health" if self.bare else url
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.client = httpx.AsyncClient(timeout=attempt_timeout_s, trust_env=False)
        self.last: ProbeResult | None = None

    def use_health_path(self, path: str) -> None:
        """The engine is known: a bare URL asks its health path from now on."""
        if self.bare and path:
            self.url = self.base + (path if path.startswith("/") else "/" + path)

    async def check(self, our_pids: set[int] | None = None) -> ProbeResult:
        now = time.time()
        try:
            r = await self.client.get(self.url)
        except httpx.ConnectError as e:
            res = ProbeResult("down", None, f"connection refused ({e.__class__.__name__})", now)
        except httpx.TimeoutException:
            res = ProbeResult("down", None, "no answer within the attempt timeout", now)
        except httpx.HTTPError as e:
            res = ProbeResult("error", None, str(e) or e.__class__.__name__, now)
        else:
            foreign = False
            if our_pids is not None:
                holders = listener_pids(self.port)
                foreign = bool(holders) and not (holders & our_pids)
            if foreign:
                res = ProbeResult(
                    "foreign",
                    r.status_code,
                    f"port {self.port} is held by another process "
                    f"(pid {', '.join(map(str, sorted(listener_pids(self.port))))})",
                    now,
                )
            elif r.status_code == 200:
                res = ProbeResult("up", 200, "", now)
            elif r.status_code == 503:
                res = ProbeResult("loading", 503, r.text[:200], now)
            elif r.status_code == 404:
                res = ProbeResult("foreign", 404, f"{self.url} answered 404: not this server's health endpoint", now)
            else:
                res = ProbeResult("loading", r.status_code, r.text[:200], now)
        self.last = res
        return res

    async def verify(self, timeout_s: float = 120.0) -> tuple[bool, float, str]:
        """One-token completion: the only proof that the model generates."""
        start = time.monotonic()
        try:
            return await asyncio.wait_for(self._verify(start), timeout_s)
        except TimeoutError:
            return False, time.monotonic() - start, f"no completion within {timeout_s:g} s"

    async def _verify(self, start: float) -> tuple[bool, float, str]:
        try:
            model = "default"
            while True:
                # The log can say "ready" a moment before the socket accepts (uvicorn logs, then serves).
                try:
                    r = await self.client.get(self.base + "/v1/models", timeout=10)
                    break
                except httpx.ConnectError:
                    await asyncio.sleep(0.05)
            if r.status_code == 200:
                model = model_of(r.json(), model)
            body = {"model": model, "prompt": "Hello", "max_tokens": 1, "temperature": 0}
            r = await self.client.post(self.base + "/v1/completions", json=body, timeout=120)
            took = time.monotonic() - start
            if r.status_code != 200:
                return False, took, f"POST /v1/completions answered {r.status_code}: {r.text[:200]}"
            return True, took, ""
        except (httpx.HTTPError, ValueError) as e:
            return False, time.monotonic() - start, f"verification request failed: {e or e.__class__.__name__}"

    async def close(self) -> None:
        await self.client.aclose()


def model_of(answer: object, default: str) -> str:
    """The first model's id from a /v1/models answer, whatever its shape (a server may answer a list of
    names, a bare list, or a string): the default model name when it does not say."""
    data = answer.get("data") if isinstance(answer, dict) else answer
    if isinstance(data, list) and data:
        first = data[0]
        if isinstance(first, dict) and isinstance(first.get("id"), str):
            return str(first["id"])
        if isinstance(first, str):
            return first
    return default
