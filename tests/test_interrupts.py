"""The stop signals' handlers around the event loop's life (sources/interrupts.py)."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bootwatch.sources import interrupts


def test_handlers_are_off_the_loop_and_its_wakeup_fd_before_the_loop_closes() -> None:
    # asyncio closes its wakeup pipe before removing its handlers; a signal in between makes Python print
    # "Exception ignored when trying to write to the signal wakeup fd" (seen in the soak test). After
    # `retiring`, no wakeup fd is set and a stop signal is only kept, while the loop is still open.
    saved = {sig: signal.getsignal(sig) for sig in interrupts.STOP_SIGNALS}
    seen: dict[str, object] = {}

    async def command() -> int:
        interrupts.interrupts()
        return 7

    async def main() -> int:
        code = await interrupts.retiring(command())
        seen["wakeup_fd"] = signal.set_wakeup_fd(-1)  # returns the fd that was set
        seen["loop_handlers"] = dict(asyncio.get_running_loop()._signal_handlers)  # type: ignore[attr-defined]
        return code

    try:
        assert asyncio.run(main()) == 7
        assert seen == {"wakeup_fd": -1, "loop_handlers": {}}
        before = len(interrupts._early)
        signal.raise_signal(signal.SIGINT)  # caught and kept, not a KeyboardInterrupt
        assert interrupts._early[before:] == [signal.SIGINT]
    finally:
        del interrupts._early[:]
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_stop_signal_while_the_modules_load_leaves_quietly(tmp_path: Path, signame: str) -> None:
    # The soak test hit it: Ctrl-C ~50 ms after start, inside `import rich`, printed a KeyboardInterrupt
    # traceback and died of the signal. Signals at many points of the start-up, before anything is started.
    log = tmp_path / "x.log"
    log.write_text("INFO:     Application startup complete.\n")
    sig = getattr(signal, signame)
    for delay in (0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.12, 0.16, 0.2):
        p = subprocess.Popen(
            [sys.executable, "-m", "bootwatch", "watch", str(log), "--json", "--timeout", "30"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(delay)
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
        if "Traceback" in err:
            # Python's own start-up (runpy, site, this package's few lines, `__main__` importing the handlers)
            # is before any code of ours can act: out of reach. Past it, no frame of ours is ever shown.
            # So is _console.py's own `import signal` (its module body, before main() can set a handler): a
            # loaded machine (xdist workers on 2 cores) stretches the start-up until a signal lands there.
            ours = re.findall(r"/bootwatch/([\w/]+\.py)\", line \d+, in (\S+)", err)
            assert len(ours) == len(re.findall(r"/bootwatch/[\w/]+\.py", err)), err  # every frame of ours read
            assert all(
                f in ("__init__.py", "__main__.py") or (f, fn) == ("_console.py", "<module>") for f, fn in ours
            ), (
                delay,
                err,
            )
            continue
        # 128 + n from bootwatch; killed by the signal itself only before Python ran any code of ours
        assert p.returncode in (128 + sig, -sig), (delay, p.returncode, err)
