"""The health URL: checked when the user gives one, guessed from the server's own --host/--port otherwise."""

from __future__ import annotations

from urllib.parse import urlsplit

from bootwatch.errors import UsageError
from bootwatch.text import shown

_PORT_FLAGS = ("--port", "-p", "--server-port")
_HOST_FLAGS = ("--host", "--hostname")


def check_url(url: str, what: str = "--url") -> str:
    """The URL, if bootwatch can probe it; else a UsageError that says what is wrong."""
    example = "(for example http://127.0.0.1:8000/health)"
    try:
        parts = urlsplit(url)
    except ValueError as e:  # "Invalid IPv6 URL": an unclosed bracket
        raise UsageError(f"{what} {shown(url)}: not a URL ({e}) {example}") from None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise UsageError(f"{what} {shown(url)}: a URL has no control characters")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"{what} {shown(url)}: needs http:// or https:// and a host {example}")
    try:
        port = parts.port
    except ValueError:
        raise UsageError(
            f"{what} {shown(url)}: the port must be a number from 1 to 65535 "
            "(an IPv6 address goes in brackets: http://[::1]:8000/health)"
        ) from None
    if not parts.hostname:
        raise UsageError(f"{what} {shown(url)}: no host {example}")
    if port == 0:
        raise UsageError(f"{what} {shown(url)}: port 0 is not a port a server listens on")
    if any(c.isspace() for c in url):
        raise UsageError(f"{what} {shown(url)}: a URL has no spaces")
    return url


def guess_url(argv: list[str]) -> str | None:
    """The health URL from the server's own command line (--host/--port), if it names a port. A --port
    that is no port is an error now, before anything starts (`-p` is left alone: docker's -p 8000:8000)."""
    host, port = "127.0.0.1", None
    for i, a in enumerate(argv):
        for flags, setter in ((_PORT_FLAGS, "port"), (_HOST_FLAGS, "host")):
            for fl in flags:
                val = None
                if a == fl and i + 1 < len(argv):
                    val = argv[i + 1]
                elif a.startswith(fl + "="):
                    val = a.split("=", 1)[1]
                if val is None:
                    continue
                if setter == "port" and val.isdigit():
                    n = int(val)
                    if n > 65535 and fl != "-p":
                        raise UsageError(f"the server's {fl} {val} is not a port (1-65535); nothing was started")
                    if 0 < n < 65536:
                        port = n
                    elif n == 0:
                        port = None  # the server picks one; the log will say which
                elif setter == "host":
                    host = val
    if port is None:
        return None
    host = host.strip("[]")
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    netloc = f"[{host}]" if ":" in host else host
    return check_url(f"http://{netloc}:{port}/health", "the server's --host/--port make")
