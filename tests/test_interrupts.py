"""The stop signals' handlers around the event loop's life (sources/interrupts.py)."""

from __future__ import annotations

import asyncio
import signal

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
