"""A stand-in server for the live tests: it plays a REAL recorded log with the original pacing scaled down,
and then behaves as asked (exit with a code, die by SIGKILL, hang, lose a child, serve HTTP).

Usage: fake_server.py LOG [--out FILE] [--scale S] [--max-gap G] [--lines N] [--then MODE] [--port P]
       [--early-port] [--child TITLE] [--kill-child-after-ready]
MODE: exit:N | kill | hang | serve
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STAMP = re.compile(rb"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d|\d\d-\d\d \d\d:\d\d:\d\d)")
READY = re.compile(rb"fired up and ready to roll|Application startup complete|router/src/server.rs:\d+: Connected")
state = {"ready": False}


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


def serve(port: int) -> None:
    srv = ThreadingHTTPServer(("127.0.0.1", port), Health)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


def main() -> int:
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
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, lambda *_: os._exit(0))
    out = open(a.out, "ab", buffering=0) if a.out else sys.stdout.buffer  # noqa: SIM115
    child = None
    if a.child:
        child = subprocess.Popen([a.child, "-c", "import time; time.sleep(3600)"], executable=sys.executable)
    if a.port and a.early_port:
        serve(a.port)
    with open(a.log, "rb") as f:
        lines = f.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if a.lines:
        lines = lines[: a.lines]
    last = None
    for raw in lines:
        t = stamp(raw)
        if t is not None and last is not None and t > last:
            time.sleep(min((t - last) * a.scale, a.max_gap))
        if t is not None:
            last = t
        out.write(raw + b"\n")
        out.flush()
        if READY.search(raw):
            if a.port and not a.early_port:
                serve(a.port)
            state["ready"] = True
    if a.port and not state["ready"] and a.then == "serve":
        state["ready"] = True
        if not a.early_port:
            serve(a.port)
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
