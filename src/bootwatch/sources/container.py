"""Follow a container's or a pod's output through the `docker` and `kubectl` clients.

`logs -f --timestamps` streams the output; each line carries the runtime's timestamp, which bootwatch
strips before analysis and keeps to resume: when the stream ends (container restart, node log rotation) it
checks the state, and if the container runs again it reattaches from the last timestamp and drops the
lines it already had. A container that exited, was OOM-killed, or a pod whose restart count went up is
evidence that the server died.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from bootwatch.errors import UsageError
from bootwatch.sources.chunks import READ_SIZE, LineChunker
from bootwatch.sources.client import ClientFollower
from bootwatch.sources.spec import Spec


@dataclass
class Death:
    code: int | None
    signal: int | None
    reason: str


async def _run(argv: list[str]) -> tuple[int, str, str]:
    try:
        proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    except FileNotFoundError:
        raise UsageError(f"`{argv[0]}` is not installed (needed for {argv[0]} sources)") from None
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


class ContainerFollower(ClientFollower):
    def __init__(self, spec: Spec, note: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.spec = spec
        self.note = note or (lambda _msg: None)
        self.offset = 0  # bytes handed on (for silence detection)
        self.death: Death | None = None
        self.restarts_seen: int | None = None

    # ---- the two clients ---------------------------------------------------------------------------
    def _logs_argv(self, since: str | None) -> list[str]:
        s = self.spec
        if s.kind == "docker":
            argv = ["docker", "logs", "-f", "--timestamps"]
            if since:
                argv += ["--since", since]
            return [*argv, s.container or ""]
        argv = ["kubectl", "logs", "-f", "--timestamps"]
        if s.namespace:
            argv += ["-n", s.namespace]
        if since:
            argv += [f"--since-time={since}"]
        argv.append(s.pod or "")
        if s.container:
            argv += ["-c", s.container]
        return argv

    async def _state(self) -> tuple[bool, Death | None, int | None]:
        """(running, death if it died, restart count)."""
        s = self.spec
        if s.kind == "docker":
            code, out, err = await _run(["docker", "inspect", "--format", "{{json .State}} {{.RestartCount}}",
                                         s.container or ""])
            if code != 0:
                raise UsageError(f"{s.text}: {err.strip() or 'docker inspect failed'}")
            state_json, _, restarts = out.strip().rpartition(" ")
            state = json.loads(state_json)
            count = int(restarts) if restarts.isdigit() else None
            if state.get("Running"):
                if count is not None and self.restarts_seen is not None and count > self.restarts_seen:
                    # It died and the restart policy brought it back: this launch is over.
                    return True, Death(state.get("ExitCode"), None, f"container {s.container} restarted "
                                       f"(restart count {count}): the server died"), count
                return True, None, count
            exit_code = state.get("ExitCode")
            why = "OOMKilled" if state.get("OOMKilled") else f"exited with code {exit_code}"
            signal = 9 if state.get("OOMKilled") else None
            return False, Death(exit_code, signal, f"container {s.container} {why}"), count
        argv = ["kubectl", "get", "pod", s.pod or "", "-o", "json"]
        if s.namespace:
            argv[3:3] = ["-n", s.namespace]
        code, out, err = await _run(argv)
        if code != 0:
            raise UsageError(f"{s.text}: {err.strip() or 'kubectl get pod failed'}")
        pod = json.loads(out)
        statuses = pod.get("status", {}).get("containerStatuses") or []
        st = next((c for c in statuses if not s.container or c.get("name") == s.container), None)
        if st is None:
            return False, None, None
        count = st.get("restartCount")
        term = (st.get("state") or {}).get("terminated") or (st.get("lastState") or {}).get("terminated")
        running = "running" in (st.get("state") or {})
        death = None
        if term and (not running or (self.restarts_seen is not None and count and count > self.restarts_seen)):
            why = term.get("reason") or f"exit code {term.get('exitCode')}"
            death = Death(term.get("exitCode"), 9 if term.get("reason") == "OOMKilled" else None,
                          f"pod {s.pod} container {st.get('name')} terminated: {why} "
                          f"(exit code {term.get('exitCode')}, restarts {count})")
        return running, death, count

    # ---- streaming ---------------------------------------------------------------------------------
    async def chunks(self) -> AsyncIterator[bytes]:
        since: str | None = None
        seen_at_since: Counter[bytes] = Counter()  # lines had at the latest timestamp (a reattach resends them)
        first = True
        try:
            while True:
                if first:
                    running, death, count = await self._state()
                    self.restarts_seen = count
                    first = False
                proc = await asyncio.create_subprocess_exec(*self._logs_argv(since), stdin=asyncio.subprocess.DEVNULL,
                                                            stdout=asyncio.subprocess.PIPE,
                                                            stderr=asyncio.subprocess.PIPE)
                self._proc = proc
                assert proc.stdout is not None and proc.stderr is not None
                chunker = LineChunker()
                resent = Counter(seen_at_since)  # what this stream will send again, and we must drop
                while True:
                    block = await proc.stdout.read(READ_SIZE)
                    data = chunker.push(block) if block else chunker.flush()
                    if data:
                        out: list[bytes] = []
                        # Split on \n only: a progress bar's \r updates belong to their line.
                        for line in data[:-1].split(b"\n"):
                            line += b"\n"
                            ts, sep, rest = line.partition(b" ")
                            if not sep:  # no timestamp: nothing to resume by, pass it on
                                out.append(line)
                                continue
                            stamp = ts.decode("ascii", "replace")
                            if since is not None and stamp < since:
                                continue  # before what we already had
                            if stamp == since and resent[line] > 0:
                                resent[line] -= 1  # had it before the reattach
                                continue
                            if stamp != since:
                                since, seen_at_since = stamp, Counter()
                            seen_at_since[line] += 1
                            out.append(rest)
                        if out:
                            payload = b"".join(out)
                            self.offset += len(payload)
                            yield payload
                    if not block:
                        break
                await proc.wait()
                err = (await proc.stderr.read()).decode("utf-8", "replace")
                running, death, count = await self._state()
                if death is not None:
                    self.death = death
                    self.note(f"{self.spec.label}: {death.reason}")
                    return
                if proc.returncode not in (0, None) and not running and since is None:
                    raise UsageError(f"{self.spec.text}: {err.strip() or 'logs failed'}")
                if count is not None and self.restarts_seen is not None and count > self.restarts_seen:
                    self.note(f"{self.spec.label}: restarted ({count} restarts); reattaching")
                self.restarts_seen = count
                self.note(f"{self.spec.label}: log stream ended; reattaching from {since}")
                await asyncio.sleep(0.5)
        finally:
            self.close()
