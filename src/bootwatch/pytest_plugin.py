"""The pytest plugin (entry point `pytest11`): servers for tests, started once and explained when they fail.

    def test_completion(bootwatch_server):
        server = bootwatch_server(["llama-server", "-m", "tiny.gguf", "--port", "8080"], timeout="2m")
        httpx.post(f"{server.base_url}/completion", json={"prompt": "hi", "n_predict": 1})

`bootwatch_server` (session scope) and `bootwatch_module_server` (module scope) are factories: a call starts
the command with `bootwatch.launch` and waits until it is ready; the same command with the same options is
started once per scope and shared. A start that fails raises ServerFailed / ServerStalled / ServerTimeout,
and the report of every test that needed it gets a "bootwatch" section: root cause, phase table, log path.
A test that fails while one of the servers has died gets that server's summary too.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from bootwatch.api import Server, ServerError

ServerFactory = Callable[..., "Server"]
_STARTED_KEY = pytest.StashKey[list["Server"]]()
# The failed starts already explained, by which test (the error is kept: its id must not be reused meanwhile).
_TOLD_KEY = pytest.StashKey[dict[int, tuple["ServerError", str]]]()


class _Servers:
    """The servers one fixture scope started, by command and options; stopped when the scope ends."""

    def __init__(self, config: pytest.Config, log_dir: Path) -> None:
        self.config = config
        self.log_dir = log_dir
        self.stack = contextlib.ExitStack()
        self.running: dict[str, Server] = {}
        self.failed: dict[str, ServerError] = {}  # a start that failed fails every test that asks again: once

    def start(self, cmd: str | Sequence[str], **options: Any) -> Server:
        from bootwatch.api import ServerError, launch

        __tracebackhide__ = True  # a failed start is the server's story, not bootwatch's frames
        key = json.dumps([cmd if isinstance(cmd, str) else list(cmd), sorted(options.items())], default=str)
        if key in self.failed:  # at once: a start that failed is not made again for every test that asks
            raise _again(self.failed[key])
        if key in self.running:
            server = self.running[key]
            if not server.alive():
                self.failed[key] = died = _died(server)  # said once; later tests are told it is the same
                del self.running[key]
                raise died
            return server
        options.setdefault("log_dir", self.log_dir)
        try:
            server = self.stack.enter_context(launch(cmd, **options))
        except ServerError as e:
            self.failed[key] = e
            raise
        self.running[key] = server
        self.config.stash.setdefault(_STARTED_KEY, []).append(server)
        return server

    def close(self) -> None:
        started = self.config.stash.get(_STARTED_KEY, [])
        for server in self.running.values():
            if server in started:
                started.remove(server)  # stopped on purpose: no later failure blames it
        self.stack.close()


_FIRST = "_bootwatch_first"  # on a repeated failure: the first one, whose test's report tells the story


def _again(first: ServerError) -> ServerError:
    """The failure of a start already made for an earlier test, raised anew (the same class, summary and log)
    with a note that nothing was started this time: re-raising the first object would grow its traceback."""
    again = type(first)(
        f"{first} [as for an earlier test in this scope: not started again]",
        first.report,
        first.log_path,
    )
    setattr(again, _FIRST, getattr(first, _FIRST, first))
    return again


def _died(server: Server) -> ServerError:
    """A shared server that died since an earlier test got it: no test is handed a dead one."""
    from bootwatch.api import ServerFailed, display_name

    report = server.analyze()
    cause = (report.raw.get("runtime_failure") or {}).get("text") or "no line in the log explains it"
    return ServerFailed(
        f"{display_name(server.argv)} (pid {server.pid}) died after it was ready (exit status "
        f"{server.exit_code()}): {cause} (log: {server.log_path})",
        report,
        server.log_path,
    )


def _servers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerFactory]:
    servers = _Servers(request.config, tmp_path_factory.mktemp("bootwatch-logs"))
    try:
        yield servers.start
    finally:
        servers.close()


@pytest.fixture(scope="session")
def bootwatch_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Generator[ServerFactory, None, None]:
    """`bootwatch_server(cmd, **launch_options)` -> a ready `bootwatch.Server`, shared by the whole session."""
    yield from _servers(request, tmp_path_factory)


@pytest.fixture(scope="module")
def bootwatch_module_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Generator[ServerFactory, None, None]:
    """As `bootwatch_server`, with the servers stopped at the end of the module."""
    yield from _servers(request, tmp_path_factory)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.failed:
        return
    from bootwatch.api import ServerError, display_name

    exc = call.excinfo.value if call.excinfo is not None else None
    if isinstance(exc, ServerError) and call.excinfo is not None:
        # One line for the error (where the test asked for the server, and the cause), and the server's story
        # once: every later test that shares the server points back to it.
        longrepr = call.excinfo.getrepr(style="line")
        crash = getattr(longrepr, "reprcrash", None)
        if crash is not None:  # the short summary's line: the class's own name, then the cause at once
            crash.message = f"{type(exc).__name__}: {exc}"
        report.longrepr = longrepr
        told = item.config.stash.setdefault(_TOLD_KEY, {})
        first = getattr(exc, _FIRST, exc)
        if id(first) in told:
            report.sections.append(("bootwatch", f"the same server as in {told[id(first)][1]} (see its report)"))
        else:
            told[id(first)] = (first, item.nodeid)
            report.sections.append(("bootwatch: why the server did not start", exc.details()))
        return
    # The test failed for its own reasons, or because a server it talks to died under it.
    for server in item.config.stash.get(_STARTED_KEY, []):
        if not server.alive():
            with contextlib.suppress(Exception):  # the report must not fail because the log went away
                again = server.analyze()
                text = (
                    f"{display_name(server.argv)} (pid {server.pid}) is no longer running "
                    f"(exit status {server.exit_code()})\n{again.text(str(server.log_path))}"
                    f"log: {server.log_path}\n"
                )
                report.sections.append(("bootwatch: a server died", text))


__all__ = ["ServerFactory", "bootwatch_module_server", "bootwatch_server"]
