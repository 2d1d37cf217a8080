"""A stand-in server for the live tests: it plays a REAL recorded log with the original pacing scaled down,
and then behaves as asked (exit with a code, die by SIGKILL, hang, lose a child, serve HTTP).

Usage: fake_server.py LOG [--out FILE] [--scale S] [--max-gap G] [--lines N] [--then MODE] [--port P]
       [--host H] [--early-port] [--child TITLE] [--daemon-child TITLE] [--kill-child-after-ready]
       [--sigint exit|ignore|count] [--journal FILE] [--pidfile FILE]
MODE: exit:N | kill | hang | serve

Each line of LOG is written with one write() call, so what it wrote is checkable: the output is always
the first N lines of LOG, byte for byte; --journal keeps N (written after each line: the output holds
N or N+1 lines).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STAMP = re.compile(rb"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d|\d\d-\d\d \d\d:\d\d:\d\d)")
READY = re.compile(rb"fired up and ready to roll|Application startup complete|router/src/server.rs:\d+: Connected")
state = {"ready": False}
# A child that dies of Ctrl-C quietly (no KeyboardInterrupt traceback in the server's output).
# Started with SIGINT blocked (see spawn_child): one that came meanwhile is taken once it can kill quietly.
QUIET_CHILD = (
    "import signal, time; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); time.sleep(3600)"
)


def spawn_child(title: str, new_session: bool = False, renames_after: float | None = None) -> subprocess.Popen[bytes]:
    """A child whose Python startup a Ctrl-C cannot interrupt (a KeyboardInterrupt traceback would land in
    the server's output): SIGINT is blocked across fork and exec, and the child unblocks it when ready.
    `renames_after`: the child execs itself under another title after that many seconds and lives on (what a
    process forked from vLLM's EngineCore does when it becomes a worker)."""
    code = QUIET_CHILD
    if renames_after is not None:
        code = (
            f"import os, time; time.sleep({renames_after}); "
            f"os.execv({sys.executable!r}, ['bwtest-renamed-worker', '-c', {QUIET_CHILD!r}])"
        )
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return subprocess.Popen([title, "-c", code], executable=sys.executable, start_new_session=new_session)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def stamp(line: bytes) -> float | None:
    m = STAMP.search(line[:120])
    if not m:
        return None
    s = m.group(1).decode()
    fmt = "%Y-%m-%d %H:%M:%S" if len(s) == 19 else "%m-%d %H:%M:%S"
    try:
        return time.mktime(time.strptime(s.replace("T", " "), fmt))
    except ValueError:
        return None


class Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        if self.path.startswith("/v1/models"):
            body, code = b'{"object":"list","data":[{"id":"fake"}]}', 200
        else:
            code, body = (200, b'{"status":"ok"}') if state["ready"] else (503, b'{"error":"Loading model"}')
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        body = b'{"choices":[{"text":" x"}]}'
        self.send_response(200 if state["ready"] else 503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class Health6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def serve(port: int, host: str = "127.0.0.1") -> None:
    srv = (Health6 if ":" in host else ThreadingHTTPServer)((host, port), Health)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


def count_sigints(fd: int) -> None:
    """One line per SIGINT the kernel delivered (the C handler writes a byte to the wakeup fd each time,
    where a Python handler may run once for two), then exit a second after the first: a real server that
    takes a second Ctrl-C as "terminate immediately" would have seen it by then."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    signal.signal(signal.SIGINT, lambda *_: None)

    def reader() -> None:
        n = 0
        while True:
            for b in os.read(r, 64):
                if b == signal.SIGINT:
                    n += 1
                    os.write(fd, b"fake_server: SIGINT #%d\n" % n)
                    if n == 1:
                        threading.Timer(1.0, lambda: os._exit(0)).start()

    # A real engine has threads busy on a CPU: the kernel hands a signal to one of them at once, so a second
    # signal microseconds later is a second delivery, not merged with the first. The main thread blocks
    # SIGINT (else the kernel prefers it, asleep); one thread spins in C, without the GIL, taking SIGINT.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    threading.Thread(target=reader, daemon=True).start()

    def spin() -> None:
        import ctypes

        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        size = 4 << 20
        buf = ctypes.create_string_buffer(size)
        ctypes.memset(buf, 1, size - 1)
        strlen = ctypes.CDLL(None).strlen
        while True:
            strlen(buf)

    threading.Thread(target=spin, daemon=True).start()


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--out")
    ap.add_argument("--scale", type=float, default=0.01)
    ap.add_argument("--max-gap", type=float, default=0.2)
    ap.add_argument("--lines", type=int, default=0, help="play only the first N lines")
    ap.add_argument("--then", default="exit:0")
    ap.add_argument("--port", type=int)
    ap.add_argument("--early-port", action="store_true", help="listen (answering 503) before the ready line")
    ap.add_argument("--child", help="start a child process with this title")
    ap.add_argument("--kill-child-after-ready", action="store_true")
    ap.add_argument("--child-renames-after", type=float, help="the --child execs under another title after S seconds")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--daemon-child", help="start a child with this title that leaves the group (setsid)")
    ap.add_argument(
        "--sigint",
        default="exit",
        choices=["exit", "ignore", "count"],
        help="count: write one line per SIGINT delivered, exit 1 s after the first",
    )
    ap.add_argument("--journal", help="after each line, the number of lines written so far")
    ap.add_argument("--pidfile", help="write the pids of this server and its children here, one a line")
    return ap.parse_args()


def handle_signals(a: argparse.Namespace, fd: int) -> None:
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    if a.sigint == "exit":
        signal.signal(signal.SIGINT, lambda *_: os._exit(0))
    elif a.sigint == "ignore":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    else:
        count_sigints(fd)


def start_children(a: argparse.Namespace) -> subprocess.Popen[bytes] | None:
    """The --child (returned: it may be killed later) and --daemon-child processes, and the pidfile."""
    child = None
    kids = []
    if a.child:
        child = spawn_child(a.child, renames_after=a.child_renames_after)
        kids.append(child.pid)
    if a.daemon_child:
        kids.append(spawn_child(a.daemon_child, new_session=True).pid)
    if a.pidfile:
        with open(a.pidfile, "w") as f:
            f.write("".join(f"{p}\n" for p in (os.getpid(), *kids)))
    return child


def play(a: argparse.Namespace, fd: int) -> None:
    """Write the log's lines with its own pacing (scaled); listen on --port once the ready line is out."""
    with open(a.log, "rb") as f:
        lines = f.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if a.lines:
        lines = lines[: a.lines]
    last = None
    journal = os.open(a.journal, os.O_WRONLY | os.O_CREAT) if a.journal else None
    for n, raw in enumerate(lines, 1):
        t = stamp(raw)
        if t is not None and last is not None and t > last:
            time.sleep(min((t - last) * a.scale, a.max_gap))
        if t is not None:
            last = t
        os.write(fd, raw + b"\n")  # one call: a kill cannot cut a line in two
        if journal is not None:
            os.pwrite(journal, b"%12d\n" % n, 0)
        if READY.search(raw):
            if a.port and not a.early_port:
                serve(a.port, a.host)
            state["ready"] = True


def main() -> int:
    a = parse_args()
    fd = os.open(a.out, os.O_WRONLY | os.O_CREAT | os.O_APPEND) if a.out else sys.stdout.fileno()
    handle_signals(a, fd)
    child = start_children(a)
    if a.port and a.early_port:
        serve(a.port, a.host)
    play(a, fd)
    if a.port and not state["ready"] and a.then == "serve":
        state["ready"] = True
        if not a.early_port:
            serve(a.port, a.host)
    if child is not None and a.kill_child_after_ready:
        time.sleep(1.0)  # a real engine process lives for a while before it dies
        child.kill()
        child.wait()
    mode = a.then
    if mode.startswith("exit:"):
        if child is not None:
            child.kill()
        return int(mode.split(":", 1)[1])
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    while True:  # hang / serve: until SIGTERM
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
