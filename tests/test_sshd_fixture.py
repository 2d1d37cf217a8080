"""The real-sshd test fixture works: commands run, host-key and auth failures fail as ssh reports them,
connections can be cut from the server side, and no sshd outlives its stop."""

from __future__ import annotations

import subprocess
import time

import psutil

from . import sshd_fixture
from .sshd_fixture import SCRIPT, SshdServer, start_server, stop_server

# The fixtures, by name (importing them would read as unused imports).
sshd = sshd_fixture.sshd
sshd_wrong_hostkey = sshd_fixture.sshd_wrong_hostkey
sshd_wrong_clientkey = sshd_fixture.sshd_wrong_clientkey


def test_echo_hello(sshd: SshdServer):
    r = sshd.ssh(["echo", "hello"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hello\n"
    assert sshd.alias == "bwtest"
    assert sshd.config.is_file() and sshd.host_key_path.is_file() and sshd.client_key_path.is_file()
    assert f"Port {sshd.port}" in sshd.config.read_text()
    # The command string is quoted once for the remote shell.
    assert sshd.ssh(["printf", "%s|", "a b", "$HOME"]).stdout == "a b|$HOME|"


def test_listens_on_loopback_only(sshd: SshdServer):
    addrs = {c.laddr for c in sshd.listener().net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
    assert addrs == {("127.0.0.1", sshd.port)}


def test_wrong_host_key_fails(sshd_wrong_hostkey):
    r = sshd_wrong_hostkey.ssh(["echo", "hello"])
    assert r.returncode == 255
    assert "Host key verification failed" in r.stderr, r.stderr
    assert "hello" not in r.stdout


def test_wrong_client_key_fails(sshd_wrong_clientkey):
    r = sshd_wrong_clientkey.ssh(["echo", "hello"])
    assert r.returncode == 255
    assert "Permission denied" in r.stderr, r.stderr
    assert "hello" not in r.stdout


def test_kill_connections_ends_running_ssh(sshd: SshdServer):
    listener = sshd.pid
    p = sshd.popen(["sleep", "30"])
    try:
        remote = sshd.wait_remote("sleep")  # the remote `sleep 30` runs under the per-connection sshd
        t0 = time.monotonic()
        assert sshd.kill_connections() >= 1
        rc = p.wait(timeout=1)
        elapsed = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert elapsed < 1.0
    assert rc == 255
    assert not remote.is_running() or remote.status() == psutil.STATUS_ZOMBIE
    # Usually "Connection to 127.0.0.1 closed by remote host."; under heavy load ssh sometimes exits 255 silently.
    err = p.stderr.read()
    assert err == "" or "closed by remote host" in err or "reset" in err, err
    # The listener is still there and still serves.
    assert sshd.pid == listener and sshd.listener().is_running()
    assert sshd.ssh(["echo", "again"]).stdout == "again\n"


def test_stop_leaves_no_process(tmp_path):
    """A second, private server: stop kills the listener, an open connection and its remote command."""
    server = start_server(tmp_path / "srv")
    p = server.popen(["sleep", "30"])
    try:
        server.wait_remote("sleep")
        pids = [q.pid for q in server.processes()]
        assert len(pids) >= 3, pids  # listener, per-connection sshd, remote sleep
        stop_server(server)  # asserts nothing is left
        assert p.wait(timeout=5) == 255
        for pid in pids:
            assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        r = subprocess.run(["bash", str(SCRIPT), "status", str(server.dir)], capture_output=True, text=True)
        assert (r.returncode, r.stdout) == (1, "stopped\n")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        stop_server(server)  # also on failure above; stop is idempotent
