"""One startup watched live: chunks from a source go through the analyzer; timers, the HTTP probe and
the process tree add what the log cannot say; the session decides when it is over and the exit code."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import psutil

from bootwatch.analyze import Analyzer
from bootwatch.probes.http import HttpProbe
from bootwatch.durations import fmt_duration
from bootwatch.sources.process import ServerProcess, describe_exit
from bootwatch.tracker import Event
from bootwatch.waiting import wait_event

EXIT = {"ready": 0, "stopped": 0, "failed": 1, "died": 1, "usage": 2, "incomplete": 3, "stalled": 4, "timeout": 124,
        "interrupted": 130}
# Minutes of silence are normal while weights download, kernels compile and the first batches warm up;
# not while ranks rendezvous.
STALL_FACTOR = {"download": 3.0, "load_weights": 2.0, "load_draft": 2.0, "compile": 4.0, "cuda_graph": 3.0,
                "warmup": 4.0, "kv_cache": 2.0, "distributed_init": 1.0, "start": 1.0, "config": 1.0}
TICK_S = 0.25  # timers only: new data, a verdict, a probe answer or the server's exit wake the loop at once


@dataclass
class Options:
    timeout_s: float = 3600.0
    stall_s: float | None = 600.0
    verify: bool = False
    replay: bool = False  # the end of the input ends the session (exit 3 when no verdict)
    await_new_launch: bool = False  # the file's last launch already ended: judge only a new one
    follow_after_ready: bool = False  # run: keep following until the server exits
    critical: tuple[str, ...] = ()  # process titles whose death is the server's death
    probe_required: bool = True  # the user gave the URL: it must answer 200. A URL bootwatch guessed only helps.


class Session:
    def __init__(self, analyzer: Analyzer, sink: Any, opts: Options, probe: HttpProbe | None = None,
                 server: ServerProcess | None = None, source_bytes: Any = None, source_death: Any = None) -> None:
        self.analyzer = analyzer
        self.tracker = analyzer.tracker
        self.sink = sink
        self.opts = opts
        self.probe = probe
        self.server = server
        self.source_bytes = source_bytes  # callable -> bytes read so far (for silence), or None
        self.source_death = source_death  # callable -> a Death the source saw (container exit), or None
        self._death_reported = False
        self._reader: asyncio.Task[None] = None  # type: ignore[assignment]
        self.wake = asyncio.Event()  # set by whatever should be looked at now (shared by a cluster's nodes)
        self._last_child_check = 0.0
        self.start = time.time()
        self.last_output = self.start
        self._bytes_seen = 0
        self.outcome: str | None = None
        self.ready_at: float | None = None
        self.stall_warned = False
        self.input_done = False
        self.runtime_failed = False
        self._critical_seen: dict[int, str] = {}
        self._cpu_procs: dict[int, psutil.Process] = {}
        self.health = "not checked"
        self.verify_result: tuple[bool, float, str] | None = None
        self._baseline_launches = 0
        self._prober: asyncio.Task[None] | None = None

    # ---- helpers -----------------------------------------------------------------------------------
    def emit(self, events: list[Event]) -> None:
        now = time.time()
        for ev in events:
            if self.opts.await_new_launch and self.tracker.launches <= self._baseline_launches:
                continue
            self.sink.event(ev, now)
            if ev.kind == "failed" and ev.data.get("runtime"):
                self.runtime_failed = True

    def verdict(self) -> str:
        if self.opts.await_new_launch and self.tracker.launches <= self._baseline_launches:
            return "incomplete"
        return self.tracker.verdict()

    def _phase(self) -> str:
        launch = self.tracker.launch
        return launch.current.name if launch and launch.current else "start"

    def _cpu_percent(self) -> float | None:
        if self.server is None:
            return None
        total = 0.0
        for p in self.server.tree():
            proc = self._cpu_procs.setdefault(p.pid, p)
            with contextlib.suppress(psutil.Error):
                total += proc.cpu_percent(None)
        return total

    # ---- the loop ----------------------------------------------------------------------------------
    async def _read(self, chunks: AsyncIterator[bytes]) -> None:
        async for data in chunks:
            now = time.time()
            self.last_output = now
            self.emit(self.analyzer.feed(data, now))
            self.wake.set()
            launch = self.tracker.launch
            if self.server is not None and launch is not None and self.tracker.launches == 1 and launch.phases:
                # We launched it: its start phase began at the spawn, not at its first line (imports are slow).
                first = launch.phases[0]
                if first.name == "start" and first.start_t is not None and first.start_t > self.start:
                    first.start_t = self.start
        self.input_done = True
        self.wake.set()

    async def _probe_loop(self) -> None:
        assert self.probe is not None
        last_state = None
        while True:
            ours = {p.pid for p in self.server.tree()} if self.server is not None else None
            try:
                res = await self.probe.check(ours)
            except Exception as e:  # a probe that breaks must say so, not stop probing in silence
                from bootwatch.probes.http import ProbeResult

                res = ProbeResult("error", None, f"probe failed: {e.__class__.__name__}: {e}", time.time())
            label = {"down": "refused", "loading": f"{res.status} (starting)", "up": "200",
                     "foreign": f"not this server: {res.detail}", "error": res.detail}[res.state]
            if label != last_state:
                last_state = label
                self.health = label
                self.wake.set()
                self.sink.event(Event("fact", res.t, {"name": "health", "value": label, "url": self.probe.url}),
                                time.time())
            await asyncio.sleep(0.1 if res.state in ("down", "loading") else 1.0)

    def _log_ready(self) -> bool:
        return self.verdict() == "ready"

    def _probe_ready(self) -> bool:
        return self.probe is not None and self.probe.last is not None and self.probe.last.state == "up"

    def _is_ready(self) -> bool:
        if self.verdict() == "failed" or (self.tracker.launch and self.tracker.launch.dying is not None):
            return False
        if self.probe is not None and self.opts.probe_required:
            # The probe must pass; a log that says ready is not enough when the user asked for a URL.
            return self._probe_ready()
        # A guessed URL answering 200 from our own process also counts: some logs never say ready
        # (SGLang at --log-level warning).
        return self._log_ready() or self._probe_ready()

    def _probe_from_log(self) -> None:
        """run without a URL: the port the server says it listens on becomes the probe."""
        if self.probe is not None or self.server is None or self.tracker.launch is None:
            return
        port = self.tracker.launch.facts.get("port")
        if isinstance(port, int) and 0 < port < 65536:
            self.probe = HttpProbe(f"http://127.0.0.1:{port}/health")
            self._prober = asyncio.create_task(self._probe_loop())

    def _check_children(self) -> None:
        """A child that matters (vLLM EngineCore, SGLang scheduler) dying while the parent lives on."""
        if self.server is None or not self.opts.critical:
            return
        alive = {}
        for p in self.server.tree()[1:]:
            with contextlib.suppress(psutil.Error):
                title = " ".join(p.cmdline()[:1]) or p.name()
                if any(c in title or c in p.name() for c in self.opts.critical):
                    alive[p.pid] = title
        for pid, title in list(self._critical_seen.items()):
            if pid not in alive:
                del self._critical_seen[pid]
                if self.server.poll() is None:
                    self.emit(self.tracker.exited(None, None, reason=f"child process {title} (pid {pid}) died "
                                                  "while the server process lives on"))
        self._critical_seen.update(alive)

    def _stall_check(self, now: float) -> str | None:
        if self.opts.stall_s is None or self.ready_at is not None:
            return None
        phase = self._phase()
        limit = self.opts.stall_s * STALL_FACTOR.get(phase, 1.0)
        silent = now - self.last_output
        if silent < limit / 2:
            self.stall_warned = False
            return None
        launch = self.tracker.launch
        last = (launch.last_line or (launch.recent[-1] if launch.recent else "")) if launch else ""
        cpu = self._cpu_percent()
        busy = "" if cpu is None else (f"; the server still uses CPU ({cpu:.0f}% of a core)" if cpu >= 5
                                       else "; the server is idle (no CPU)")
        msg = (f"no output for {fmt_duration(silent)} in {phase} (limit {fmt_duration(limit)}){busy}; "
               f"last line: {last[:200]}")
        if not self.stall_warned:
            self.stall_warned = True
            self.sink.event(Event("stall", now, {"phase": phase, "silent_s": round(silent, 1), "message": msg,
                                                 "cpu_percent": cpu}), now)
        if silent >= limit:
            self.sink.event(Event("stalled", now, {"phase": phase, "message": msg}), now)
            return "stalled"
        return None

    def begin(self, chunks: AsyncIterator[bytes]) -> None:
        self._baseline_launches = self.tracker.launches if self.opts.await_new_launch else 0
        self._reader = asyncio.create_task(self._read(chunks))
        self._prober = asyncio.create_task(self._probe_loop()) if self.probe is not None else None
        self._last_child_check = 0.0
        if self.server is not None:
            self._watch_exit()

    def _watch_exit(self) -> None:
        """The server's exit wakes the loop at once: a daemon thread blocks in wait() (it never keeps
        bootwatch from exiting, e.g. after --detach)."""
        assert self.server is not None and self.server.proc is not None
        loop, proc, wake = asyncio.get_running_loop(), self.server.proc, self.wake

        def wait() -> None:
            proc.wait()
            with contextlib.suppress(RuntimeError):  # the loop may be gone already
                loop.call_soon_threadsafe(wake.set)

        threading.Thread(target=wait, name="bootwatch-server-exit", daemon=True).start()

    async def wait_for_wake(self) -> None:
        await wait_event(self.wake, TICK_S)
        self.wake.clear()

    async def run(self, chunks: AsyncIterator[bytes]) -> str:
        """Returns the outcome: ready | failed | incomplete | stalled | timeout | stopped | died."""
        self.begin(chunks)
        try:
            while True:
                await self.wait_for_wake()
                outcome = await self.tick(time.time())
                if outcome is not None:
                    return outcome
        finally:
            await self.stop()

    async def tick(self, now: float) -> str | None:
        """One look at everything; an outcome once the session is over."""
        reader = self._reader
        if reader.done() and not reader.cancelled() and reader.exception() is not None:
            raise reader.exception()  # type: ignore[misc]
        if self.source_bytes is not None:
            seen = self.source_bytes()
            if seen != self._bytes_seen:
                self._bytes_seen, self.last_output = seen, now
        self.emit(self.tracker.settle(now))
        self._probe_from_log()
        death = self.source_death() if self.source_death is not None else None
        if death is not None and not self._death_reported:
            # A container that exited or was OOM-killed, a pod that restarted: the server died.
            self._death_reported = True
            ready = self.verdict() == "ready"
            self.emit(self.tracker.exited(death.code, death.signal, reason=death.reason))
            return "died" if ready else "failed"
        if self.server is not None and (now - self._last_child_check >= 0.25 or self.server.proc is not None
                                        and self.server.proc.returncode is not None):
            self._last_child_check = now
            self._check_children()
            code = self.server.poll()
            if code is not None:
                await self._drain(reader)
                rc, sig = describe_exit(code)
                if self.verdict() == "ready":
                    if rc == 0 and not self.runtime_failed:
                        return "stopped"  # stopped cleanly after readiness
                    if not self.runtime_failed:
                        self.emit(self.tracker.exited(rc, sig))
                    return "died"
                self.emit(self.tracker.exited(rc, sig))
                return "failed"
        if self.ready_at is None:
            if self.verdict() == "failed":
                return "failed"
            if self._is_ready():
                self.ready_at = now
                if self.probe is not None and self.verdict() != "ready":
                    self.sink.event(Event("ready", now, {"text": f"{self.probe.url} answered 200",
                                                         "line_no": None}), now)
                if self.opts.verify and not await self._verify():
                    return "failed"
                if not self.opts.follow_after_ready:
                    return "ready"
            if self.input_done and self.opts.replay:
                self.emit(self.analyzer.finish())
                return self.verdict() if self.verdict() in ("ready", "failed") else "incomplete"
            if now - self.start >= self.opts.timeout_s:
                self.sink.event(Event("timeout", now, {"message": f"not ready after "
                                                       f"{fmt_duration(now - self.start)} (in "
                                                       f"{self._phase()})"}), now)
                return "timeout"
            stalled = self._stall_check(now)
            if stalled:
                return stalled
        elif self.runtime_failed and self.server is None:
            return "died"
        return None

    async def stop(self) -> None:
        for task in (self._reader, self._prober):
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def _verify(self) -> bool:
        """Ready means the model generates: one completion, with its latency."""
        if self.probe is None:
            ok, took, err = False, 0.0, "cannot verify: no URL (give --url, or a --port the server listens on)"
        else:
            ok, took, err = await self.probe.verify()
        self.verify_result = (ok, took, err)
        now = time.time()
        self.sink.event(Event("fact", now, {"name": "verify_latency_s", "value": round(took, 3), "ok": ok,
                                            "error": err or None}), now)
        if not ok:
            self.sink.event(Event("failed", now, {"text": err, "category": "warmup", "line_no": None,
                                                  "runtime": False}), now)
        return ok

    async def _drain(self, reader: asyncio.Task[None]) -> None:
        """The server exited: give the reader a moment to take the last lines it wrote."""
        deadline = time.time() + 0.5
        last = -1
        while time.time() < deadline:
            seen = self.source_bytes() if self.source_bytes is not None else 0
            if seen == last and seen >= _file_size(self.server):
                break
            last = seen
            await asyncio.sleep(0.05)
        self.tracker.tb.flush()

    def summary(self, outcome: str) -> dict[str, Any]:
        s = self.analyzer.summary()
        if self.opts.await_new_launch and self.tracker.launches <= self._baseline_launches:
            # The file's last launch had ended before we looked and no new one began: nothing to report on.
            s.update(verdict=outcome if outcome != "ready" else "incomplete", ready=None, failure=None,
                     runtime_failure=None, note="the last launch in the file had already ended; no new launch began")
        if self.verify_result and not self.verify_result[0]:
            # The log said ready but the model did not generate: that startup failed.
            s["verdict"], s["ready"] = "failed", None
            s["failure"] = {"line_no": None, "text": self.verify_result[2], "category": "warmup", "context": []}
        elif outcome in ("failed", "incomplete", "stalled", "timeout") and s["verdict"] != "ready":
            s["verdict"] = outcome
        elif outcome == "ready":
            s["verdict"] = "ready"
        if s["verdict"] != "ready":
            s["ready"] = None
        if s["verdict"] != "failed":
            s["failure"] = None
        s["health"] = self.health if self.probe is not None else None
        s["elapsed_s"] = round(time.time() - self.start, 3)
        if self.verify_result is not None:
            ok, took, err = self.verify_result
            s["verify"] = {"ok": ok, "latency_s": round(took, 3), "error": err or None}
        return s


def _file_size(server: ServerProcess | None) -> int:
    if server is None:
        return 0
    try:
        return server.log_path.stat().st_size
    except OSError:
        return 0
