"""A REAL OpenSSH server on 127.0.0.1 for tests, run by ``scripts/sshd-test-server``.

Use it from a test module with::

    from tests.sshd_fixture import sshd, sshd_wrong_hostkey, sshd_wrong_clientkey  # noqa: F401

``sshd`` (session scope) installs openssh-server once if missing (``scripts/sshd-test-server install``),
starts a private sshd in a temporary directory and yields an :class:`SshdServer`; on teardown it stops
that sshd and asserts that none of its processes (listener, per-connection sshd, remote commands) is left.
``sshd_wrong_hostkey`` / ``sshd_wrong_clientkey`` yield :class:`SshClient` views of the same server whose
client config holds a wrong known_hosts entry ("Host key verification failed") or a key that is not in
authorized_keys ("Permission denied (publickey)").
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "sshd-test-server"
ALIAS = "bwtest"


def _run_script(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def _alive(pid: int) -> bool:
    """True if pid is a live process (a zombie waiting to be reaped by init counts as dead)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@dataclass
class SshClient:
    """An ssh client configuration (``ssh -F config alias``) for one server."""

    config: Path
    alias: str = ALIAS
    ssh_binary: str = field(default_factory=lambda: shutil.which("ssh") or "ssh")

    def ssh_argv(self, cmd: list[str] | None = None) -> list[str]:
        argv = [self.ssh_binary, "-F", str(self.config), self.alias]
        if cmd:
            argv += ["--", shlex.join(cmd)]
        return argv

    def ssh(self, cmd: list[str], *, timeout: float = 30, **kwargs) -> subprocess.CompletedProcess:
        """Run ``ssh -F config bwtest -- <cmd joined as one shell string>``; output captured as text."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run(self.ssh_argv(cmd), timeout=timeout, **kwargs)

    def popen(self, cmd: list[str], **kwargs) -> subprocess.Popen:
        """Start ``ssh ... -- cmd`` in the background (stdout/stderr piped, text)."""
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        kwargs.setdefault("text", True)
        return subprocess.Popen(self.ssh_argv(cmd), **kwargs)


@dataclass
class SshdServer(SshClient):
    """A running test sshd: its directory, port and keys, plus helpers."""

    port: int = 0
    dir: Path = Path()
    host_key_path: Path = Path()
    client_key_path: Path = Path()

    @property
    def pid(self) -> int:
        return int((self.dir / "sshd.pid").read_text().strip())

    @property
    def log_path(self) -> Path:
        return self.dir / "sshd.log"

    def listener(self) -> psutil.Process:
        return psutil.Process(self.pid)

    def processes(self) -> list[psutil.Process]:
        """The listening sshd and all its live descendants."""
        try:
            lst = self.listener()
            return [lst, *[p for p in lst.children(recursive=True) if _is_live(p)]]
        except (psutil.NoSuchProcess, FileNotFoundError, ValueError):
            return []

    def connections(self) -> list[psutil.Process]:
        """The per-connection sshd processes (live children of the listener)."""
        try:
            return [p for p in self.listener().children() if _is_live(p)]
        except (psutil.NoSuchProcess, FileNotFoundError, ValueError):
            return []

    def kill_connections(self, timeout: float = 2.0) -> int:
        """SIGKILL every per-connection sshd and what runs under it; the listener stays. Returns how many
        connections were killed. Their ssh clients see "closed by remote host" and exit 255."""
        conns = self.connections()
        victims: list[psutil.Process] = []
        for c in conns:
            with contextlib.suppress(psutil.NoSuchProcess):
                victims += [*c.children(recursive=True), c]
        for p in victims:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        # Not psutil.wait_procs: killed grandchildren are not ours to reap and stay zombies until init reaps
        # them (seconds here); a zombie is dead, so poll for "gone or zombie".
        deadline = time.monotonic() + timeout
        alive = [p for p in victims if _is_live(p)]
        while alive and time.monotonic() < deadline:
            time.sleep(0.01)
            alive = [p for p in alive if _is_live(p)]
        assert not alive, f"per-connection processes survived SIGKILL: {[p.pid for p in alive]}"
        return len(conns)

    def wait_connections(self, n: int = 1, timeout: float = 10.0) -> list[psutil.Process]:
        """Wait until at least n connections are open (e.g. after starting a background ssh)."""
        deadline = time.monotonic() + timeout
        while True:
            conns = self.connections()
            if len(conns) >= n or time.monotonic() > deadline:
                return conns
            time.sleep(0.05)

    def wait_remote(self, name: str, timeout: float = 10.0) -> psutil.Process:
        """Wait until a process named name (e.g. "sleep") runs under a connection; return it."""
        deadline = time.monotonic() + timeout
        while True:
            for c in self.connections():
                try:
                    for p in c.children(recursive=True):
                        if p.name() == name and _is_live(p):
                            return p
                except psutil.NoSuchProcess:
                    pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"no remote {name!r} under {self.dir} after {timeout}s")
            time.sleep(0.05)

    # --- client configurations that must fail -------------------------------------------------------

    def _variant(self, name: str, replace: dict[str, str]) -> Path:
        vdir = self.dir / "variants" / name
        vdir.mkdir(parents=True, exist_ok=True)
        lines = []
        for line in self.config.read_text().splitlines():
            key = line.strip().split(" ", 1)[0]
            lines.append(f"    {key} {replace[key]}" if key in replace else line)
        cfg = vdir / "ssh_config"
        cfg.write_text("\n".join(lines) + "\n")
        return cfg

    def wrong_hostkey_config(self) -> Path:
        """An ssh_config whose known_hosts pins a different (fresh) ed25519 key for [127.0.0.1]:port."""
        vdir = self.dir / "variants" / "wrong_hostkey"
        vdir.mkdir(parents=True, exist_ok=True)
        key = _keygen(vdir / "other_host_key", "bootwatch-test-wrong-host")
        known = vdir / "known_hosts"
        known.write_text(f"[127.0.0.1]:{self.port} {' '.join(key.read_text().split()[:2])}\n")
        return self._variant("wrong_hostkey", {"UserKnownHostsFile": str(known)})

    def wrong_clientkey_config(self) -> Path:
        """An ssh_config whose IdentityFile is a fresh key that is not in authorized_keys."""
        vdir = self.dir / "variants" / "wrong_clientkey"
        vdir.mkdir(parents=True, exist_ok=True)
        _keygen(vdir / "stranger_key", "bootwatch-test-stranger")
        return self._variant("wrong_clientkey", {"IdentityFile": str(vdir / "stranger_key")})


def _is_live(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _keygen(path: Path, comment: str) -> Path:
    """A fresh passphrase-less ed25519 key at path; returns the .pub path."""
    for p in (path, path.with_name(path.name + ".pub")):
        p.unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )
    return path.with_name(path.name + ".pub")


_installed: list[bool] = []


def ensure_installed() -> None:
    """Run ``scripts/sshd-test-server install`` once per process; pytest.fail with its output on error."""
    if _installed:
        return
    try:
        r = _run_script("install")
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"scripts/sshd-test-server install timed out after {e.timeout}s", pytrace=False)
    if r.returncode != 0:
        pytest.fail(
            f"scripts/sshd-test-server install failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}",
            pytrace=False,
        )
    _installed.append(True)


def start_server(dir: Path) -> SshdServer:
    """Start a test sshd in dir (via the script) and describe it. Stop it with stop_server()."""
    ensure_installed()
    r = _run_script("start", str(dir), timeout=60)
    if r.returncode != 0:
        log = dir / "sshd.log"
        pytest.fail(
            f"scripts/sshd-test-server start failed (exit {r.returncode}):\n{r.stdout}\n{r.stderr}\n"
            + (log.read_text()[-3000:] if log.exists() else ""),
            pytrace=False,
        )
    dir = Path(dir).resolve()
    env = dict(line.split("=", 1) for line in (dir / "env").read_text().splitlines() if "=" in line)
    return SshdServer(
        config=dir / "ssh_config",
        alias=env.get("ALIAS", ALIAS),
        port=int(env["PORT"]),
        dir=dir,
        host_key_path=dir / "host_key",
        client_key_path=dir / "client_key",
    )


def stop_server(server: SshdServer, timeout: float = 5.0) -> None:
    """Stop the server (via the script) and assert that none of its processes is left alive."""
    procs = server.processes()
    r = _run_script("stop", str(server.dir), timeout=60)
    deadline = time.monotonic() + timeout
    left = [p.pid for p in procs if _alive(p.pid)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p.pid for p in procs if _alive(p.pid)]
    # Also anything still naming this server's config on its command line (e.g. a listener not in the pid file).
    marker = f"{server.dir}/sshd_config"
    for p in psutil.process_iter(["pid", "cmdline"]):
        if marker in " ".join(p.info.get("cmdline") or []) and _alive(p.pid) and p.pid not in left:
            left.append(p.pid)
    assert r.returncode == 0, f"scripts/sshd-test-server stop failed: {r.stdout}{r.stderr}"
    assert not left, f"sshd processes left after stop: {left}"


@pytest.fixture(scope="session")
def sshd(tmp_path_factory) -> SshdServer:
    ensure_installed()
    server = start_server(tmp_path_factory.mktemp("sshd"))
    try:
        yield server
    finally:
        stop_server(server)


@pytest.fixture(scope="session")
def sshd_wrong_hostkey(sshd: SshdServer) -> SshClient:
    """A client of the session's sshd whose known_hosts holds a WRONG host key."""
    return SshClient(config=sshd.wrong_hostkey_config(), alias=sshd.alias)


@pytest.fixture(scope="session")
def sshd_wrong_clientkey(sshd: SshdServer) -> SshClient:
    """A client of the session's sshd whose IdentityFile is a key not in authorized_keys."""
    return SshClient(config=sshd.wrong_clientkey_config(), alias=sshd.alias)


__all__ = [
    "SshClient",
    "SshdServer",
    "ensure_installed",
    "start_server",
    "stop_server",
    "sshd",
    "sshd_wrong_hostkey",
    "sshd_wrong_clientkey",
]
