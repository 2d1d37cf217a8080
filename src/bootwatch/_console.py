"""The console script's first code. A stop signal that comes while the command's modules load (rich, httpx,
asyncio: ~100 ms) finds nothing started yet: leave at once with 128 + its number, as every later stop does,
not with a KeyboardInterrupt traceback. `cli.main` installs the real handlers before it starts anything."""

from __future__ import annotations

import os
import signal


def _leave(signum: int, _frame: object) -> None:
    os._exit(128 + signum)


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, _leave)
    from bootwatch.cli import entry

    entry()
