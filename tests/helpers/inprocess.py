"""`bootwatch ARGS` in this process: the CLI's own main() with its argument list, stdout and stderr captured, and
the exit code it returns. No interpreter start (about half a second on 2 cores, most of a replay's time), for
tests of what a command says; what is about processes (signals, groups, a killed bootwatch) stays a subprocess.

main() installs its stop-signal handlers (sources/interrupts.catch_early); they are put back as they were, so
a Ctrl-C still reaches pytest, and a signal one kept is not seen by the next call."""

from __future__ import annotations

import contextlib
import io
import json
import signal
from dataclasses import dataclass
from typing import Any

from bootwatch import cli
from bootwatch.sources import interrupts


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.stdout.splitlines() if x.startswith("{")]


def run_cli(*argv: str) -> Ran:
    saved = {sig: signal.getsignal(sig) for sig in interrupts.STOP_SIGNALS}
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(list(argv))
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        interrupts._early.clear()
    return Ran(code, out.getvalue(), err.getvalue())
