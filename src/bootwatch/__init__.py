"""bootwatch: watch an LLM inference server start up and say, without lying, how it is going.

The library API (see README, "Python API"): `launch` a server and wait until it is ready, `watch` one that
starts elsewhere, `analyze` a log. Importing bootwatch stays cheap: the API loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
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
