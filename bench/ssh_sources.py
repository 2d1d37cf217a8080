"""ssh sources benchmark: what following 1 vs 32 remote logs through the system ssh client costs and how fast
`bootwatch watch --each` notices that every one of them is ready.

Run from the repo root:  python bench/ssh_sources.py [--sources 32] [--trials 5] [--idle 20]

A real OpenSSH server is started on 127.0.0.1 with scripts/sshd-test-server (into a temporary directory, stopped
at the end, even on an error or Ctrl-C); every source is `ssh://bwtest/<tmp>/replicaN.log`, the `bwtest` alias
of the ssh_config that script writes, given to bootwatch through BOOTWATCH_SSH_CONFIG.

1. Ready-detection lag: `bootwatch watch --each SOURCE... --json --timeout 5m` is started on empty logs; once the
   remote `tail` of every source runs (bootwatch follows them all), one writer process replays a real ready
   startup log (the corpus log up to its "Application startup complete." line) into every replica, then appends
   each replica's ready line after its own random 0.2-1.0 s and records time.time() right after that flush. The
   lag is bootwatch's exit (a pidfd, no polling) minus the LAST ready-line write: for N sources, when the last
   replica became ready. bootwatch must exit 0 with every server ready in its JSON summary. The `t` (time.time(),
   to the ms) of its JSON `ready` events and of its summary split the lag: transport (worst source), last ready
   event -> summary, summary -> exit.
2. CPU (user+sys seconds) over the whole watch, spawn to exit, connection set-up included. It is exact, not
   sampled: this process is a child subreaper (PR_SET_CHILD_SUBREAPER), so the daemonized sshd and every process
   orphaned below it or below bootwatch are reparented here and reaped with os.wait4. bootwatch's own CPU is read
   from its zombie before it is reaped; its ssh clients are the CPU of the children bootwatch reaped (os.wait4 total
   minus bootwatch's own) plus that of the ssh clients left for us to reap. The sshd side (per-connection sshd,
   the remote shell and its `tail`) is what the listener accumulated once every session of the watch was reaped,
   plus any remote `tail` orphaned by its session (reaped here).
3. Idle cost: the same sources, each replica holding the startup log without its ready line, nothing written for
   --idle seconds once bootwatch is connected and quiet: CPU % of one core of bootwatch, of its ssh clients and
   of the sshd side (psutil, all live processes).

Everything started here runs in its own session and is killed on the way out; at the end the bench checks (psutil)
that none of its descendants and no process naming its temporary directory is left. bootwatch's history goes to a
temporary BOOTWATCH_HOME.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import platform
import random
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from common import default_corpus, reexec_under_venv

try:
    import psutil
except ImportError:  # not the venv's Python: run again under it
    reexec_under_venv()
    raise

REPO = Path(__file__).resolve().parent.parent
SSHD_SCRIPT = REPO / "scripts" / "sshd-test-server"
ALIAS = "bwtest"  # the Host alias in the ssh_config written by sshd-test-server
READY_LOG = "vllm/v0.11-elloraa-gloo-ready.log"
READY_TEXT = b"Application startup complete."
WATCH_TIMEOUT = "5m"
EXIT_WAIT_S = 330.0  # bootwatch's --timeout plus a margin
CONNECT_WAIT_S = 60.0
PR_SET_CHILD_SUBREAPER = 36


# ------------------------------------------------------------------------------------------- small helpers


def fmt_s(s: float) -> str:
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def fmt_cpu(s: float) -> str:
    return f"{s * 1e3:.0f} ms" if s < 10 else f"{s:.1f} s"


def p50_max(values: Sequence[float], fmt: str = "s") -> str:
    f = fmt_s if fmt == "s" else fmt_cpu
    return f"{f(statistics.median(values))} / {f(max(values))}"


def progress(msg: str) -> None:
    print(f"  .. {msg}", file=sys.stderr, flush=True)


def bootwatch_cmd() -> list[str]:
    script = Path(sys.executable).parent / "bootwatch"  # the venv's console script
    return [str(script)] if script.exists() else [sys.executable, "-m", "bootwatch"]


def own_cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


def total_cpu(p: psutil.Process) -> float:
    """The process's CPU plus that of the children it has reaped."""
    t = p.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def split_log(src: Path) -> tuple[bytes, bytes]:
    """(everything before the ready line, the ready line)."""
    lines = src.read_bytes().splitlines(keepends=True)
    idx = next(i for i, line in enumerate(lines) if READY_TEXT in line)
    return b"".join(lines[:idx]), lines[idx]


# ------------------------------------------------------------------------------------------- the writer


def writer_main(argv: Sequence[str]) -> int:
    """Child process: replay a startup log into every replica, then each replica's ready line after its own
    random pause; record (replica, time.time() right after the flush) for each ready line."""
    ap = argparse.ArgumentParser(prog="ssh_sources.py _writer")
    ap.add_argument("--log", required=True, help="corpus log holding the ready line")
    ap.add_argument("--stamp", required=True, help="gets one 'INDEX TIME' line per ready line written")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("replicas", nargs="+")
    a = ap.parse_args(argv)
    rng = random.Random(a.seed)
    lines = Path(a.log).read_bytes().splitlines(keepends=True)
    idx = next(i for i, line in enumerate(lines) if READY_TEXT in line)
    outs = [open(p, "ab") for p in a.replicas]  # noqa: SIM115 - closed below
    try:
        for line in lines[:idx]:  # the replicas start up side by side, one line each in turn
            for out in outs:
                out.write(line)
                out.flush()
        began = time.time()
        due = sorted((began + rng.uniform(0.2, 1.0), i) for i in range(len(outs)))
        with open(a.stamp, "w") as stamp:
            for at, i in due:
                time.sleep(max(0.0, at - time.time()))
                outs[i].write(lines[idx])
                outs[i].flush()
                written = time.time()
                stamp.write(f"{i} {written!r}\n")
                stamp.flush()
    finally:
        for out in outs:
            out.close()
    return 0


# ------------------------------------------------------------------------------------------- processes


@dataclass
class Reaped:
    pid: int
    name: str
    cpu_s: float


class Procs:
    """Every process started here, plus the orphans a child subreaper inherits; `reap` collects zombies with
    their exact rusage, `cleanup` kills whatever is still alive."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.children: dict[int, subprocess.Popen[bytes]] = {}
        self.orphans: list[Reaped] = []  # reaped here, not started here; drained by the caller

    def spawn(
        self, cmd: Sequence[str], stdout: int | Path = subprocess.DEVNULL, stderr: int | Path = subprocess.DEVNULL
    ) -> subprocess.Popen[bytes]:
        with contextlib.ExitStack() as stack:
            out = stack.enter_context(stdout.open("wb")) if isinstance(stdout, Path) else stdout
            err = stack.enter_context(stderr.open("wb")) if isinstance(stderr, Path) else stderr
            proc = subprocess.Popen(
                list(cmd), stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=self.env, start_new_session=True
            )
        self.children[proc.pid] = proc
        return proc

    def reap(self) -> None:
        """Collect every zombie child: ours get their returncode, orphans go to `self.orphans`."""
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None or info.si_pid == 0:
                return
            pid = info.si_pid
            name = comm(pid)
            _, status, usage = os.wait4(pid, 0)
            proc = self.children.pop(pid, None)
            if proc is not None:
                proc.returncode = os.waitstatus_to_exitcode(status)
            else:
                self.orphans.append(Reaped(pid, name, usage.ru_utime + usage.ru_stime))

    def take_orphans(self) -> list[Reaped]:
        self.reap()
        out, self.orphans = self.orphans, []
        return out

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # our child leads its own group: the group is ours
            proc.wait()
        self.children.pop(proc.pid, None)

    def cleanup(self) -> None:
        """SIGTERM first (bootwatch then closes its ssh clients itself), SIGKILL what is left 5 s later."""
        for proc in self.children.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.time() + 5.0
        while any(proc.poll() is None for proc in self.children.values()) and time.time() < deadline:
            time.sleep(0.05)
        for proc in list(self.children.values()):
            self.kill(proc)
        self.reap()


def comm(pid: int) -> str:
    """The command name of a process, zombies included ('' if gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat[stat.find("(") + 1 : stat.rfind(")")]


def become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def kill_descendants() -> list[str]:
    """SIGKILL every live descendant of this process; what was killed."""
    killed = []
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if p.status() != psutil.STATUS_ZOMBIE:
                killed.append(f"{p.pid} {' '.join(p.cmdline())[:100]}")
                p.kill()
    return killed


def leftovers(marker: str) -> list[str]:
    """Live processes that descend from us or name our temporary directory."""
    ours = {p.pid for p in psutil.Process().children(recursive=True)}
    found = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        cmdline = " ".join(p.info["cmdline"] or [])
        if p.info["status"] != psutil.STATUS_ZOMBIE and (p.pid in ours or marker in cmdline):
            found.append(f"{p.pid} {cmdline[:100]}")
    return found


def running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def remote_quiet(sshd: Sshd, procs: Procs, timeout: float = 15.0) -> None:
    """Until no sshd session is open and no orphan of one (reparented here) runs, or `timeout`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        procs.reap()
        listener = sshd.listener
        busy = [
            p
            for p in psutil.Process().children(recursive=True)
            if (listener is None or p.pid != listener.pid) and running(p)
        ]
        if not busy:
            return
        time.sleep(0.05)


def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> float | None:
    """time.time() at the moment `proc` exits (pidfd: no polling delay), or None after `timeout`. The process is
    left a zombie, for its final CPU times to be read."""
    fd = os.pidfd_open(proc.pid)
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        now = time.time()
    finally:
        os.close(fd)
    return now if ready else None


def reap_watcher(procs: Procs, proc: subprocess.Popen[bytes]) -> tuple[float, float]:
    """Reap an exited bootwatch: (its own CPU, the CPU of the children it reaped), in seconds."""
    own = own_cpu(psutil.Process(proc.pid))  # still a zombie: its final counters
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    procs.children.pop(proc.pid, None)
    return own, max(0.0, usage.ru_utime + usage.ru_stime - own)


# ------------------------------------------------------------------------------------------- sshd


def ssh_version() -> str:
    res = subprocess.run(["ssh", "-V"], capture_output=True, text=True)
    return (res.stderr or res.stdout).strip().split(",")[0]


class Sshd:
    """The test sshd (scripts/sshd-test-server) in its own directory."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.config = directory / "ssh_config"
        self.log = directory / "sshd.log"
        self.listener: psutil.Process | None = None

    def start(self) -> None:
        res = subprocess.run([str(SSHD_SCRIPT), "start", str(self.dir)], capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"sshd-test-server start failed: {res.stderr.strip() or res.stdout.strip()}")
        self.listener = psutil.Process(int((self.dir / "sshd.pid").read_text().strip()))

    def stop(self) -> None:
        res = subprocess.run([str(SSHD_SCRIPT), "stop", str(self.dir)], capture_output=True, text=True)
        if res.returncode != 0:
            progress(f"sshd-test-server stop: {res.stderr.strip()}")

    @property
    def proc(self) -> psutil.Process:
        if self.listener is None:
            raise RuntimeError("sshd is not started")
        return self.listener

    def tails(self, marker: str) -> set[str]:
        """The files that a remote `tail` under the listener follows (path containing `marker`)."""
        files = set()
        for p in self.proc.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if p.name() == "tail":
                    files.update(a for a in p.cmdline() if marker in a)
        return files

    def sessions_closed(self, timeout: float = 15.0) -> None:
        """Until the listener has reaped every session (so that its children's CPU is counted)."""
        deadline = time.time() + timeout
        while self.proc.children():
            if time.time() > deadline:
                raise RuntimeError(f"sshd sessions still open {timeout:.0f} s after bootwatch exited")
            time.sleep(0.02)

    def log_size(self) -> int:
        return self.log.stat().st_size

    def log_counts(self, since: int) -> tuple[int, int]:
        """(connections accepted, connections dropped past MaxStartups) in sshd.log after byte `since`."""
        with self.log.open("rb") as f:
            f.seek(since)
            text = f.read()
        return text.count(b"Connection from "), text.count(b"past MaxStartups")  # a dropped one is not "from"


# ------------------------------------------------------------------------------------------- one watch


@dataclass
class Trial:
    lag_s: float
    transport_s: float  # worst source: its ready line written -> bootwatch emits its ready event
    verdict_s: float  # bootwatch emits the last ready event -> it prints its summary (the JSON `t`s)
    exit_s: float  # bootwatch prints its summary -> it exits
    connect_s: float
    bootwatch_cpu: float
    ssh_cpu: float
    sshd_cpu: float
    connections: int
    dropped: int
    lingering_tails: int
    orphaned_ssh: int  # ssh clients bootwatch did not reap before exiting
    orphaned_tails: int  # remote tails their session did not reap
    stderr: list[str] = field(default_factory=list)


@dataclass
class Idle:
    seconds: float
    bootwatch_pct: float
    ssh_pct: float
    sshd_pct: float
    stable: bool  # the same processes at both ends of the window (no reconnection)


@dataclass
class Bench:
    procs: Procs
    sshd: Sshd
    tmp: Path
    src_log: Path
    rng: random.Random

    def sources(self, paths: Sequence[Path]) -> list[str]:
        return [f"ssh://{ALIAS}{p}" for p in paths]

    def replicas(self, name: str, n: int, content: bytes = b"") -> tuple[Path, list[Path]]:
        workdir = self.tmp / name
        workdir.mkdir()
        paths = [workdir / f"replica{i + 1}.log" for i in range(n)]
        for p in paths:
            p.write_bytes(content)
        return workdir, paths

    def start_watch(self, workdir: Path, paths: Sequence[Path]) -> subprocess.Popen[bytes]:
        return self.procs.spawn(
            [*bootwatch_cmd(), "watch", "--each", *self.sources(paths), "--json", "--timeout", WATCH_TIMEOUT],
            stdout=workdir / "watch.jsonl",
            stderr=workdir / "watch.err",
        )

    def wait_following(self, bw: subprocess.Popen[bytes], workdir: Path, n: int) -> float:
        """Seconds until the remote `tail` of every replica in `workdir` runs."""
        start, marker = time.time(), f"{workdir}/"
        while len(self.sshd.tails(marker)) < n:
            if bw.poll() is not None:
                raise RuntimeError(
                    f"bootwatch exited ({bw.returncode}) before following its sources: "
                    f"{(workdir / 'watch.err').read_text().strip()[-500:]}"
                )
            if time.time() - start > CONNECT_WAIT_S:
                tree = [f"{c.pid} {' '.join(c.cmdline())[:80]}" for c in psutil.Process(bw.pid).children()]
                raise RuntimeError(
                    f"bootwatch did not follow all {n} sources within {CONNECT_WAIT_S:.0f} s "
                    f"({len(self.sshd.tails(marker))} followed); its children: {tree}; sshd.log ends: "
                    f"{self.sshd.log.read_text()[-800:]}"
                )
            time.sleep(0.02)
        return time.time() - start

    def settle_remote(self, marker: str) -> tuple[list[Reaped], int]:
        """After a watch: every session reaped by the listener; orphaned remote tails given 2 s to notice their
        client is gone, then killed. (the orphans reaped here, how many tails had to be killed)."""
        self.sshd.sessions_closed()
        deadline = time.time() + 2.0
        while True:
            self.procs.reap()
            alive = [p for p in psutil.Process().children() if is_tail_of(p, marker)]
            if not alive or time.time() > deadline:
                break
            time.sleep(0.02)
        for p in alive:
            with contextlib.suppress(psutil.Error):
                p.kill()
        deadline = time.time() + 5.0
        while any(is_tail_of(p, marker) for p in alive) and time.time() < deadline:
            time.sleep(0.01)
        return self.procs.take_orphans(), len(alive)  # the killed tails are zombies: reaped with their rusage

    def ready_trial(self, n: int, label: str) -> Trial:
        workdir, paths = self.replicas(label, n)
        stamp = workdir / "stamp"
        self.procs.take_orphans()
        listener0, log0 = total_cpu(self.sshd.proc), self.sshd.log_size()
        bw = self.start_watch(workdir, paths)
        connect_s = self.wait_following(bw, workdir, n)
        writer = self.procs.spawn(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "_writer",
                "--log",
                str(self.src_log),
                "--stamp",
                str(stamp),
                "--seed",
                str(self.rng.randrange(1 << 30)),
                *map(str, paths),
            ]
        )
        exited = wait_exit(bw, EXIT_WAIT_S)
        if exited is None:
            raise RuntimeError(f"{label}: bootwatch did not exit within {EXIT_WAIT_S:.0f} s")
        own, reaped_kids = reap_watcher(self.procs, bw)
        writer.wait(30)
        orphans, lingering = self.settle_remote(f"{workdir}/")
        sshd_cpu = total_cpu(self.sshd.proc) - listener0
        connections, dropped = self.sshd.log_counts(log0)
        stderr = [line for line in (workdir / "watch.err").read_text().splitlines() if line.strip()]
        seen, summary_t = ready_events(workdir / "watch.jsonl", bw.returncode, n, stderr)
        written = {int(i): float(t) for i, t in (line.split() for line in stamp.read_text().splitlines())}
        if len(written) != n:
            raise RuntimeError(f"{label}: bootwatch exited after {len(written)} of {n} ready lines were written")
        last_ready = max(written.values())
        if exited < last_ready:
            raise RuntimeError(f"{label}: bootwatch exited before the last ready line was written")
        return Trial(
            lag_s=exited - last_ready,
            transport_s=max(seen[i] - written[i] for i in range(n)),
            verdict_s=summary_t - max(seen),
            exit_s=exited - summary_t,
            connect_s=connect_s,
            bootwatch_cpu=own,
            ssh_cpu=reaped_kids + sum(o.cpu_s for o in orphans if o.name == "ssh"),
            sshd_cpu=sshd_cpu + sum(o.cpu_s for o in orphans if o.name != "ssh"),
            connections=connections,
            dropped=dropped,
            lingering_tails=lingering,
            orphaned_ssh=sum(o.name == "ssh" for o in orphans),
            orphaned_tails=sum(o.name == "tail" for o in orphans),
            stderr=stderr,
        )

    def idle(self, n: int, seconds: float) -> Idle:
        prefix, _ = split_log(self.src_log)
        workdir, paths = self.replicas(f"idle-{n}", n, prefix)
        bw = self.start_watch(workdir, paths)
        self.wait_following(bw, workdir, n)
        me = psutil.Process(bw.pid)
        wait_cpu_quiet(me)
        before, t0 = self.cpu_snapshot(me), time.monotonic()
        time.sleep(seconds)
        after, t1 = self.cpu_snapshot(me), time.monotonic()
        if bw.poll() is not None:
            raise RuntimeError(f"bootwatch exited ({bw.returncode}) during the idle measurement")
        bw.send_signal(signal.SIGTERM)
        if wait_exit(bw, 10) is None:
            self.procs.kill(bw)
        else:
            reap_watcher(self.procs, bw)
        self.settle_remote(f"{workdir}/")
        span = t1 - t0

        def pct(kind: str) -> float:
            return 100 * sum(after[kind].get(pid, 0.0) - cpu for pid, cpu in before[kind].items()) / span

        stable = all(before[k].keys() == after[k].keys() for k in before)
        return Idle(span, pct("bootwatch"), pct("ssh"), pct("sshd"), stable)

    def cpu_snapshot(self, bw: psutil.Process) -> dict[str, dict[int, float]]:
        """Own CPU of every live process, by side: bootwatch, its ssh clients, the sshd listener and below it."""
        snap: dict[str, dict[int, float]] = {"bootwatch": {bw.pid: own_cpu(bw)}, "ssh": {}, "sshd": {}}
        for kind, procs in (
            ("ssh", bw.children(recursive=True)),
            ("sshd", [self.sshd.proc, *self.sshd.proc.children(recursive=True)]),
        ):
            for p in procs:
                with contextlib.suppress(psutil.Error):
                    snap[kind][p.pid] = own_cpu(p)
        return snap


def is_tail_of(p: psutil.Process, marker: str) -> bool:
    """A live remote `tail` following one of our replicas."""
    try:
        return p.status() != psutil.STATUS_ZOMBIE and p.name() == "tail" and any(marker in a for a in p.cmdline())
    except psutil.Error:
        return False


def wait_cpu_quiet(p: psutil.Process, timeout: float = 60) -> None:
    """Until half a second passes with less than 2 % of a core used."""
    deadline = time.time() + timeout
    last = own_cpu(p)
    while time.time() < deadline:
        time.sleep(0.5)
        now = own_cpu(p)
        if now - last < 0.01:
            return
        last = now
    raise RuntimeError("bootwatch kept using CPU after reading its sources")


def ready_events(jsonl: Path, code: int | None, n: int, stderr: Sequence[str]) -> tuple[list[float], float]:
    """bootwatch exited 0 and its JSON summary says every one of the n servers is ready. The times (the JSON `t`:
    time.time() when bootwatch wrote the event, to the ms) of each source's ready event, in source order (when
    bootwatch read that line), and of the summary."""
    events = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
    summary = events[-1] if events else {}
    servers = summary.get("servers") or []
    ready = sum(1 for s in servers if s.get("verdict") == "ready")
    if code != 0 or summary.get("event") != "summary" or summary.get("verdict") != "ready" or ready != n:
        raise RuntimeError(
            f"bootwatch exit {code}, verdict {summary.get('verdict')!r}, {ready}/{n} servers ready; "
            f"stderr: {' | '.join(stderr)[-500:]}"
        )
    order = {s["node"]: i for i, s in enumerate(servers)}  # the servers come in the order of the SOURCEs
    seen: dict[int, float] = {}
    for ev in events:
        if ev.get("event") == "ready" and ev.get("node") in order:
            seen.setdefault(order[ev["node"]], float(ev["t"]))
    if len(seen) != n:
        raise RuntimeError(f"{len(seen)} ready events for {n} ready servers in {jsonl}")
    return [seen[i] for i in range(n)], float(summary["t"])


# ------------------------------------------------------------------------------------------- output


def render(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for k, r in enumerate(rows):
        out.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
        )
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def table(counts: Sequence[int], trials: dict[int, list[Trial]], idle: dict[int, Idle]) -> list[list[str]]:
    head = ["measure", *(f"{n} source{'s' if n > 1 else ''}" for n in counts)]
    rows: list[list[str]] = [head]

    def row(label: str, cell: Iterator[str]) -> None:
        rows.append([label, *cell])

    n_trials = len(trials[counts[0]])
    row(f"ready lag, p50 / max ({n_trials} trials)", (p50_max([t.lag_s for t in trials[n]]) for n in counts))
    row(
        "  ready line written -> bootwatch has it, worst source",
        (p50_max([t.transport_s for t in trials[n]]) for n in counts),
    )
    row(
        "  bootwatch has the last one -> prints its summary",
        (p50_max([t.verdict_s for t in trials[n]]) for n in counts),
    )
    row("  summary printed -> bootwatch exits", (p50_max([t.exit_s for t in trials[n]]) for n in counts))
    row(
        "connect: spawn -> every remote tail runs, p50 / max",
        (p50_max([t.connect_s for t in trials[n]]) for n in counts),
    )
    row(
        "ssh connections accepted (+ dropped past MaxStartups), max",
        (f"{max(t.connections for t in trials[n])} (+{max(t.dropped for t in trials[n])})" for n in counts),
    )
    for label, attr in (("bootwatch", "bootwatch_cpu"), ("ssh clients", "ssh_cpu"), ("sshd side", "sshd_cpu")):
        row(
            f"CPU per watch, {label}, p50 / max",
            (p50_max([getattr(t, attr) for t in trials[n]], "cpu") for n in counts),
        )
        row(
            f"  per source, {label}, p50",
            (fmt_cpu(statistics.median([getattr(t, attr) / n for t in trials[n]])) for n in counts),
        )
    for label, attr in (("bootwatch", "bootwatch_pct"), ("ssh clients", "ssh_pct"), ("sshd side", "sshd_pct")):
        span = idle[counts[0]].seconds
        row(f"idle {span:.0f} s, {label}, % of a core", (f"{getattr(idle[n], attr):.2f} %" for n in counts))
        row(f"  per source, {label}", (f"{getattr(idle[n], attr) / n:.3f} %" for n in counts))
    return rows


def notes(counts: Sequence[int], trials: dict[int, list[Trial]], idle: dict[int, Idle]) -> list[str]:
    out = []
    for n in counts:
        err = [line for t in trials[n] for line in t.stderr]
        if err:
            kinds = sorted({line[:90] for line in err})
            out.append(
                f"{n} source(s): bootwatch wrote {len(err)} stderr line(s) over {len(trials[n])} watches "
                f"despite exit 0, e.g.: {' | '.join(kinds[:3])}"
            )
        orphaned = sum(t.orphaned_ssh for t in trials[n])
        if orphaned:
            out.append(
                f"{n} source(s): {orphaned} ssh client(s) over {len(trials[n])} watches were left unreaped "
                "by bootwatch when it exited (reaped here)"
            )
        tails, lingering = sum(t.orphaned_tails for t in trials[n]), sum(t.lingering_tails for t in trials[n])
        if tails:
            out.append(
                f"{n} source(s): {tails} remote tail(s) over {len(trials[n])} watches outlived their sshd "
                f"session (orphaned); {lingering} of them still ran 2 s after it and were killed"
            )
        if not idle[n].stable:
            out.append(f"{n} source(s): the processes changed during the idle window (a reconnection?)")
    return out


# ------------------------------------------------------------------------------------------- main


def run(a: argparse.Namespace) -> tuple[list[int], dict[int, list[Trial]], dict[int, Idle], list[str]]:
    src_log = a.corpus / READY_LOG
    if not src_log.exists():
        raise SystemExit(f"{src_log}: not found (give --corpus)")
    if not SSHD_SCRIPT.exists():
        raise SystemExit(f"{SSHD_SCRIPT}: not found")
    become_subreaper()
    counts = sorted({1, a.sources})
    trials: dict[int, list[Trial]] = {n: [] for n in counts}
    idle: dict[int, Idle] = {}
    tmp = Path(tempfile.mkdtemp(prefix="bootwatch-ssh-bench-"))
    sshd = Sshd(tmp / "sshd")
    procs = Procs({**os.environ, "BOOTWATCH_HOME": str(tmp / "home"), "BOOTWATCH_SSH_CONFIG": str(sshd.config)})
    bench = Bench(procs, sshd, tmp, src_log, random.Random(a.seed))
    left: list[str] = []
    try:
        (tmp / "home").mkdir()
        sshd.start()
        progress(f"sshd listening (pid {sshd.proc.pid}, parent {sshd.proc.ppid()}), {ssh_version()}")
        for i in range(a.trials):  # interleaved, so that a change of machine load hits both alike
            for n in counts:
                t = bench.ready_trial(n, f"ready-{n}-{i}")
                trials[n].append(t)
                progress(
                    f"{n} source(s), trial {i + 1}/{a.trials}: lag {fmt_s(t.lag_s)}, connect "
                    f"{fmt_s(t.connect_s)}, CPU bootwatch {fmt_cpu(t.bootwatch_cpu)} ssh {fmt_cpu(t.ssh_cpu)} "
                    f"sshd {fmt_cpu(t.sshd_cpu)}, {t.connections} connections"
                )
        for n in counts:
            idle[n] = bench.idle(n, a.idle)
            progress(f"{n} source(s) idle: bootwatch {idle[n].bootwatch_pct:.2f} % of a core")
    finally:
        procs.cleanup()
        # The remote shells of the connections that just closed run the account's shell start-up (here root's
        # .bashrc, with `pyenv init`, which takes a lock file): let them end by themselves before anything is
        # SIGKILLed, or a lock may be left behind for every later login.
        remote_quiet(sshd, procs)
        sshd.stop()
        killed = kill_descendants()
        time.sleep(0.1)
        procs.reap()
        left = leftovers(str(tmp))
        if killed:
            left.insert(0, f"killed at the end: {'; '.join(killed)}")
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return counts, trials, idle, left


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_writer"]:
        return writer_main(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--sources", type=int, default=32, help="ssh sources of the large watch (default 32)")
    ap.add_argument("--trials", type=int, default=5, help="watches per source count (default 5)")
    ap.add_argument("--idle", type=float, default=20.0, help="seconds of the idle measurement (default 20)")
    ap.add_argument("--corpus", type=Path, default=default_corpus(), help="real logs (default tests/corpus)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the random pauses")
    a = ap.parse_args(argv)
    if a.sources < 1 or a.trials < 1:
        raise SystemExit("--sources and --trials: at least 1")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind, so that every child gets killed
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C unwinds too, even if started with it ignored
    started, load_before = time.time(), os.getloadavg()[0]
    counts, trials, idle, left = run(a)
    print(
        f"bootwatch ssh sources: {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}, {ssh_version()}; "
        f"1-min load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; {time.time() - started:.0f} s"
    )
    print(
        f"each source: ssh://{ALIAS}/<tmp>/replicaN.log on a local OpenSSH sshd (scripts/sshd-test-server), "
        f"`bootwatch watch --each SOURCE... --json --timeout {WATCH_TIMEOUT}`; the writer replays {READY_LOG} "
        "into every replica, then each ready line 0.2-1.0 s later; lag = bootwatch exit - the LAST ready-line "
        "write. CPU = user+sys over the whole watch (connection set-up included), exact (rusage via subreaper)."
    )
    print()
    print(render(table(counts, trials, idle)))
    for line in notes(counts, trials, idle):
        print(f"note: {line}")
    print("leftover processes: " + ("none" if not left else "; ".join(left)))
    return 0 if not left else 1


if __name__ == "__main__":
    sys.exit(main())
