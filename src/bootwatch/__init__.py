"""bootwatch: watch an LLM inference server start up and say, without lying, how it is going.

The library API (see README, "Python API"): `launch` a server and wait until it is ready, `watch` one that
starts elsewhere, `analyze` a log. Importing bootwatch stays cheap: the API loads on first use.
"""

from __future__ import annotations

__version__ = "0.1.0"

# Not `from typing import TYPE_CHECKING`: typing costs ~20 ms to import, and the console script can only
# take over the stop signals once this package has loaded (bootwatch/_console.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from bootwatch.api import (
        Launch,
        Report,
        Server,
        ServerError,
        ServerFailed,
        ServerIncomplete,
        ServerStalled,
        ServerTimeout,
        analyze,
        launch,
        watch,
        watch_async,
    )
    from bootwatch.errors import UsageError


def __getattr__(name: str) -> Any:
    # `python -m bootwatch probe` imports this package too: the API (asyncio, httpx, psutil) loads only when
    # a program asks for it.
    if name in _API:
        from bootwatch import api

        return getattr(api, name)
    if name == "UsageError":
        from bootwatch.errors import UsageError

        return UsageError
    raise AttributeError(f"module 'bootwatch' has no attribute {name!r}")


__all__ = [
    "Launch",
    "Report",
    "Server",
    "ServerError",
    "ServerFailed",
    "ServerIncomplete",
    "ServerStalled",
    "ServerTimeout",
    "UsageError",
    "__version__",
    "analyze",
    "launch",
    "watch",
    "watch_async",
]
_API = frozenset(__all__) - {"UsageError", "__version__"}
