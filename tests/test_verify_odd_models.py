"""`--verify` on an odd /v1/models answer goes on to the completion with the default model name (red-team-3
N20: `{"data": ["x"]}`, `[]`, `{"data": "abc"}` crashed with an internal error)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bootwatch.probes.http import HttpProbe


def _serve(models: bytes) -> tuple[ThreadingHTTPServer, list[dict]]:
    posted: list[dict] = []

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def _answer(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802
            self._answer(models)

        def do_POST(self) -> None:  # noqa: N802
            posted.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self._answer(b'{"choices": [{"text": "!"}]}')

    server = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, posted


@pytest.mark.parametrize(
    ("models", "model"),
    [(b'{"data": ["x"]}', "x"), (b"[]", "default"), (b'{"data": "abc"}', "default"), (b'{"data": [{"id": "m"}]}', "m")],
)
def test_verify_goes_on_whatever_v1_models_says(models: bytes, model: str) -> None:
    server, posted = _serve(models)
    try:
        probe = HttpProbe(f"http://127.0.0.1:{server.server_address[1]}/health")

        async def go() -> tuple[bool, float, str]:
            try:
                return await probe._verify(time.monotonic())
            finally:
                await probe.close()

        ok, _, err = asyncio.run(go())
    finally:
        server.shutdown()
    assert ok, err
    assert posted and posted[0]["model"] == model
