"""One startup watched live: chunks from a source go through the analyzer; timers, the HTTP probe and
the process tree add what the log cannot say; the session decides when it is over and the exit code."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import psutil

from bootwatch.insight.live import Insight
from bootwatch.pipeline import Analyzer
from bootwatch.probes.http import HttpProbe
from bootwatch.serving.scrape import follow_metrics
from bootwatch.sinks.protocol import ServerAware, Sink
from bootwatch.sources.process import ServerProcess, describe_exit
from bootwatch.sources.protocol import Ends, Source
from bootwatch.tracker import Event, FactEvent
from bootwatch.tracker.summary import Checked, LiveFacts, Summary
from bootwatch.tracker.verdict import (
    InputEnd,
    LogSays,
    Outcome,
    Output,
    Policy,
    ProbeAnswer,
    ProcessExit,
    Signal,
    Tick,
    VerdictMachine,
    VerifyResult,
    stall_state,
)
from bootwatch.waiting import wait_event

CHILD_CHECK_S = 0.25
CHILD_CHECK_SERVING_S = 1.0
TICK_SERVING_S = 1.0
# `watch --pid`: the server is gone; the reader has read all it wrote once nothing new came for this long (a
# file follower wakes on inotify at once, on a poll within half a second).
DRAIN_STEADY_S = 0.6
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

    def policy(self, has_probe: bool, has_server: bool) -> Policy:
        return Policy(
            timeout_s=self.timeout_s,
            stall_s=self.stall_s,
            verify=self.verify,
            replay=self.replay,
            follow_after_ready=self.follow_after_ready,
            probe_required=self.probe_required,
            has_probe=has_probe,
            has_server=has_server,
        )


class Session:
    """The I/O around one watched startup: it reads, probes and polls, and forwards what it sees to the verdict
    machine (tracker/verdict/), which alone decides how the watch ends and says so in its own events."""

    def __init__(
        self,
        analyzer: Analyzer,
        sink: Sink,
        opts: Options,
        probe: HttpProbe | None = None,
        server: ServerProcess | None = None,
        source: Source | None = None,
        insight: Insight | None = None,
        watched: psutil.Process | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.analyzer = analyzer
        # The wall clock every stamp and timer here reads. Tests give a virtual one, with a loop whose timers
        # jump to the next one when nothing is ready, so stalls and timeouts take no real time.
        self.clock = clock
        self.tracker = analyzer.tracker
        self.sink = sink
        self.opts = opts
        self.probe = probe
        self.server = server
        self.source = source  # how many bytes it read (for silence), a death it saw (container exit)
        self.insight = insight  # ETAs from history, what the tree does while the log is silent
        # `watch --pid`: the server's process, not ours to wait on. While it lives, a failure the log shows
        # without a death line does not settle on a quiet spell; its end settles the launch, as `run`'s exit does.
        self.watched = watched
        self._death_reported = False
        self._told_full = False  # the log's filesystem was found full (said once)
        self._launcher_left: bool = False  # the process we started exited 0, its children run on: followed
        self._reader: asyncio.Task[None] | None = None
        self.wake = asyncio.Event()  # set by whatever should be looked at now (shared by a cluster's nodes)
        self._last_child_check = 0.0
        self.start = self.clock()
        self.machine = VerdictMachine(opts.policy(probe is not None, server is not None), self.start)
        self._bytes_seen = 0
        self.input_done = False
        self._critical_seen: dict[int, tuple[str, psutil.Process]] = {}  # pid -> (title, the process)
        self._cpu_procs: dict[int, psutil.Process] = {}
        self.health = "not checked"
        self.verify_result: VerifyResult | None = None
        self._baseline_launches = 0
        self._prober: asyncio.Task[None] | None = None
        self._scraper: asyncio.Task[None] | None = None  # /metrics once ready, when following after ready

    # ---- helpers -----------------------------------------------------------------------------------
    @property
    def last_output(self) -> float:
        return self.machine.last_output

    def _judging(self) -> bool:
        """False while the file's last launch had ended before we looked and no new one has begun."""
        return not (self.opts.await_new_launch and self.tracker.launches <= self._baseline_launches)

    def emit(self, events: list[Event]) -> None:
        if not self._judging():
            return
        now = self.clock()
        for ev in events:
            self.sink.event(ev, now)
        if self.insight is not None and events:
            for ev in self.insight.on_events(events, now):
                self.sink.event(ev, now)

    def _says(self, now: float) -> LogSays:
        if not self._judging():
            return LogSays.nothing(now)
        return self.tracker.says(now)

    def _feed(self, signal: Signal) -> None:
        """A signal to the verdict machine; what it decides goes to the sink as it is (the machine's events are
        the only `state`, `ready`, `failed`, `timeout` and `stalled` there are)."""
        decided = self.machine.feed(signal)
        if not decided:
            return
        now = self.clock()
        for ev in decided:
            self.sink.event(ev, now)
        if self.insight is not None and self._judging():
            for ev in self.insight.on_events(decided, now):
                self.sink.event(ev, now)

    def _phase(self) -> str:
        return self._says(self.clock()).phase

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
            now = self.clock()
            self._feed(Output(now))
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
        from bootwatch.probes.http import ProbeResult

        last_state = None
        while True:
            ours = {p.pid for p in self.server.tree()} if self.server is not None else None
            try:
                res = await self.probe.check(ours)
            except Exception as e:  # a probe that breaks must say so, not stop probing in silence
                res = ProbeResult("error", None, f"probe failed: {e.__class__.__name__}: {e}", self.clock())
            label = {
                "down": "refused",
                "loading": f"{res.status} (starting)",
                "up": "200",
                "foreign": f"not this server: {res.detail}",
                "error": res.detail,
            }[res.state]
            if label != last_state:
                last_state = label
                self.health = label
                self.wake.set()
                self.sink.event(FactEvent(t=res.t, name="health", value=label, url=self.probe.url), self.clock())
            await asyncio.sleep(0.1 if res.state in ("down", "loading") else 1.0)

    def _probe_up(self) -> bool:
        return self.probe is not None and self.probe.last is not None and self.probe.last.state == "up"

    def _probe_from_log(self) -> None:
        """run without a URL: the port the server says it listens on becomes the probe; a bare URL asks the
        engine's own health path once the engine is known."""
        launch = self.tracker.launch
        if launch is None:
            return
        health = self.tracker.book.for_engine(launch.engine).health
        if self.probe is not None:
            if launch.engine != "unknown":
                self.probe.use_health_path(health)
            return
        if self.server is None:
            return
        port = launch.facts.get("port")
        if isinstance(port, int) and 0 < port < 65536:
            self.probe = HttpProbe(f"http://127.0.0.1:{port}")
            self.probe.use_health_path(health or "/health")
            self._prober = asyncio.create_task(self._probe_loop())

    def _check_children(self) -> None:
        """A child that matters (vLLM EngineCore, SGLang scheduler) dying while the parent lives on."""
        if self.server is None or not self.opts.critical:
            return
        alive = {}
        procs = self.server.tree()
        for p in procs[1:] if self.server.poll() is None else procs:  # the launcher gone, all are children
            with contextlib.suppress(psutil.Error):
                title = " ".join(p.cmdline()[:1]) or p.name()
                if any(c in title or c in p.name() for c in self.opts.critical):
                    alive[p.pid] = (title, p)
        for pid, (title, proc) in list(self._critical_seen.items()):
            if pid not in alive:
                del self._critical_seen[pid]
                if _still_running(proc):
                    # Renamed, not dead: a process the child forked carries the child's title until it execs
                    # (vLLM's EngineCore spawning a worker), and the walk may have caught it in between.
                    continue
                if self._server_alive():
                    self.emit(
                        self.tracker.exited(
                            None,
                            None,
                            reason=f"child process {title} (pid {pid}) died while the server process lives on",
                        )
                    )
        self._critical_seen.update(alive)

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
        # Timers matter while starting (stall, timeout, settling); once serving, news wakes the loop anyway.
        await wait_event(self.wake, TICK_S if self.machine.ready_at is None else TICK_SERVING_S)
        self.wake.clear()

    async def run(self, chunks: AsyncIterator[bytes]) -> Outcome:
        """Returns the outcome (an `Outcome`, which is a str)."""
        self.begin(chunks)
        try:
            while True:
                await self.wait_for_wake()
                outcome = await self.tick(self.clock())
                if outcome is not None:
                    return outcome
        finally:
            await self.stop()

    def _log_full(self, rc: int | None, sig: int | None) -> str | None:
        """How the server ended, when the filesystem of the log it writes is full: the likely cause (its
        output failed with ENOSPC), and the reason nothing in the log says so. None otherwise."""
        if self.server is None or sig or not self.server.log.out_of_space():
            return None
        return (
            f"process exited with code {rc} with no space left on the filesystem of its log "
            f"{self.server.log_path} (ENOSPC): its writes to the log failed, and what it printed last was lost"
        )

    async def _exits(self, now: float) -> bool:
        """The source or the server died: the tracker explains it, the machine is told. True when it did."""
        death = self.source.death() if self.source is not None else None
        if death is not None and not self._death_reported:
            # A container that exited or was OOM-killed, a pod that restarted: the server died.
            self._death_reported = True
            self.emit(self.tracker.exited(death.code, death.signal, reason=death.reason))
            self._feed(self._says(now))
            self._feed(ProcessExit(now, clean=False))
            return True
        if self.server is None:
            return await self._watched_gone(now)
        proc_done = self.server.proc is not None and self.server.proc.returncode is not None and not self._launcher_left
        # Walking the process tree reads every process's /proc entry: while starting a child's death must be seen
        # soon, once serving a second is soon enough (the server's own exit wakes the loop at once anyway).
        every = CHILD_CHECK_SERVING_S if self.machine.ready_at is not None else CHILD_CHECK_S
        if now - self._last_child_check < every and not proc_done:
            return False
        self._last_child_check = now
        self._check_children()
        if not self._told_full and self.server.log.out_of_space():
            # Said once, while the server lives: its output is lost from here on (a stall may follow).
            self._told_full = True
            self.sink.note(
                now, f"the filesystem of the log {self.server.log_path} is full (ENOSPC): the server's output is lost"
            )
        code = self.server.poll()
        if code is None or code == 0 and self._launcher_leaves(now):
            return False
        assert self._reader is not None
        await self._drain(self._reader)
        rc, sig = describe_exit(code)
        says = self._says(now)
        clean_stop = says.ready and rc == 0
        if not clean_stop and not says.runtime_failed:
            # Its exit status was its launcher's (the server's own is not ours to read), or it had no room to write.
            left = "the processes the launcher left running are gone" if self._launcher_left else None
            self.emit(self.tracker.exited(rc, sig, reason=left or self._log_full(rc, sig)))
        self._feed(self._says(now))
        self._feed(ProcessExit(now, clean=rc == 0))
        return True

    def _launcher_leaves(self, now: float) -> bool:
        """The process we started exited 0 with its group still running (`sh -c 'server &'`, a launch script
        that backgrounds the server): a launcher, not the server. The group is followed, and judged by its log
        and health as ever, until it is all gone. True while it runs."""
        assert self.server is not None
        members = self.server.members()
        if not self.server.launcher_exited() or not members:
            return False
        if not self._launcher_left:
            self._launcher_left = True
            pids = ", ".join(str(p.pid) for p in members[:4]) + (", ..." if len(members) > 4 else "")
            self.sink.note(
                now,
                f"the launcher (pid {self.server.pid}) exited 0 while its children run on (pid {pids}): following them",
            )
            if isinstance(self.sink, ServerAware):  # a probe of the state file asks whether the server lives
                self.sink.set_server(members[0].pid)
        return True

    def _server_alive(self) -> bool | None:
        """Whether the server still runs: the one we started (or what its launcher left running), or the one
        `--pid` named; None: nothing says."""
        if self.server is not None:
            return self.server.poll() is None or self._launcher_left and bool(self.server.members())
        if self.watched is not None:
            return _still_running(self.watched)
        return None

    async def _watched_gone(self, now: float) -> bool:
        """`watch --pid`: the named process is gone. Before ready that is the launch's death, explained by what
        the log showed (the traceback it survived no longer), or by the disappearance itself. Its exit status is
        its parent's to read, not ours: after ready it only ends the watch (stopped, unless the log says died)."""
        if self.watched is None or self._death_reported:
            return False
        every = CHILD_CHECK_SERVING_S if self.machine.ready_at is not None else CHILD_CHECK_S
        if now - self._last_child_check < every:
            return False
        self._last_child_check = now
        if _still_running(self.watched):
            return False
        self._death_reported = True
        assert self._reader is not None
        await self._drain(self._reader)  # its last lines may still be on their way to the file
        says = self._says(now)
        if not says.ready and not says.runtime_failed:
            pid = self.watched.pid
            self.emit(self.tracker.exited(None, None, reason=f"the server process (--pid {pid}) is gone"))
        self._feed(self._says(now))
        self._feed(ProcessExit(now, clean=says.ready and not says.runtime_failed))
        return True

    async def tick(self, now: float) -> Outcome | None:
        """One look at everything; the outcome once the machine says the watch is over."""
        reader = self._reader
        if reader is not None and reader.done() and not reader.cancelled() and reader.exception() is not None:
            raise reader.exception()  # type: ignore[misc]
        if self.source is not None:
            seen = self.source.bytes_read
            if seen != self._bytes_seen:
                self._bytes_seen = seen
                self._feed(Output(now))
        self.emit(self.tracker.settle(now, server_alive=self._server_alive()))
        self._probe_from_log()
        if self._scraper is None and self.opts.follow_after_ready and self.probe is not None and self.machine.ready:
            self._scraper = asyncio.create_task(follow_metrics(self.probe.url, self.tracker, self.emit))
        if await self._exits(now):
            return self.machine.outcome
        if self.input_done and self.opts.replay and not self.machine.input_ended:
            self.emit(self.analyzer.finish())
            self._feed(self._says(now))
            self._feed(InputEnd(now))
            return self.machine.outcome
        self._feed(self._says(now))
        if self.probe is not None:
            self._feed(ProbeAnswer(now, self._probe_up(), self.probe.url))
        activity = None
        if self.insight is not None and self._judging():
            activity, said = self.insight.tick(now, self.machine.log.phase)
            self.emit(said)
        self._feed(Tick(now, self._cpu_if_stalling(now), activity))
        if self.machine.verify_pending and self.verify_result is None:
            await self._verify()
        return self.machine.outcome

    def _cpu_if_stalling(self, now: float) -> float | None:
        """CPU use only matters to a stall message: measured only once the silence is long."""
        st = stall_state(self.opts.stall_s, self.machine.log.phase, now - self.machine.quiet_since)
        return self._cpu_percent() if st is not None and st.warn else None

    async def stop(self) -> None:
        for task in (self._reader, self._prober, self._scraper):
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def _verify(self) -> None:
        """Ready means the model generates: one completion, with its latency."""
        if self.probe is None:
            ok, took, err = False, 0.0, "cannot verify: no URL (give --url, or a --port the server listens on)"
        else:
            ok, took, err = await self.probe.verify()
        now = self.clock()
        self.verify_result = VerifyResult(now, ok, took, err)
        self.sink.event(
            FactEvent(t=now, name="verify_latency_s", value=round(took, 3), ok=ok, error=err or None),
            now,
        )
        self._feed(self.verify_result)  # a failed one is the machine's `failed` (category warmup)

    async def _drain(self, reader: asyncio.Task[None]) -> None:
        """The server exited: give the reader a moment to take the last lines it wrote (it is done as soon as
        it has read up to the file's size; the deadline only bounds a reader that cannot)."""
        deadline = self.clock() + 2.0
        if isinstance(self.source, Ends):
            # The server is gone: the source reads to the end and hands on its last line, newline or not (a
            # crash often leaves the cause unterminated), then ends.
            self.source.end_of_input()
            await asyncio.wait({reader}, timeout=deadline - self.clock())  # its error, if any, is tick()'s to raise
        last, steady_since = -1, self.clock()
        while self.clock() < deadline and not reader.done():
            seen = self.source.bytes_read if self.source is not None else 0
            if seen != last:
                last, steady_since = seen, self.clock()
            elif self.server is not None and seen >= _file_size(self.server):
                break
            elif self.server is None and self.clock() - steady_since >= DRAIN_STEADY_S:
                break  # a file we did not open for the server: its size is not ours to know; nothing new came
            await asyncio.sleep(0.05)
        self.tracker.tb.flush()

    def summary(self, outcome: str) -> dict[str, Any]:
        return self.summary_of(Outcome(outcome)).to_json()

    def summary_of(self, outcome: Outcome) -> Summary:
        """The summary: the tracker's facts and the machine's decision, with what this watch saw beside the log."""
        v = self.verify_result
        live = LiveFacts(
            health=self.health if self.probe is not None else None,
            elapsed_s=round(self.clock() - self.start, 3),
            verify=None if v is None else Checked(v.ok, v.latency_s, v.error or None),
            # The file's last launch had ended before we looked and no new one began: nothing to report on.
            note=None if self._judging() else "the last launch in the file had already ended; no new launch began",
        )
        return self.analyzer.summary(self.machine.decision(outcome), live)


def _still_running(proc: psutil.Process) -> bool:
    """Still there and not a zombie (is_running tells a later process given the same pid from this one)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _file_size(server: ServerProcess | None) -> int:
    # The file the server writes, not the path: after a logrotate the path is another file.
    return 0 if server is None else server.log_size()
