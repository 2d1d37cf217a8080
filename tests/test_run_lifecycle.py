"""`bootwatch run` never leaves a server behind, whatever stops it; every argument is checked before the
server starts; exit codes say what happened; --then is part of the record. Real bootwatch processes, real
stand-in servers, real signals."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from .conftest import CORPUS, HELPER, SESSION_MARK, assert_none_left, wait_until_open

BOOTWATCH = [sys.executable, "-m", "bootwatch"]
READY_VLLM = CORPUS / "vllm/v0.11-elloraa-gloo-ready.log"
READY_SGLANG = CORPUS / "sglang/docs-2025-05-no-tp0-prefix-ready.log"


def ours() -> list[psutil.Process]:
    """Live processes this test session started that must not outlive a run: stand-in servers, their
    children (titles bwtest-...), --then commands (bwtest-...) and bootwatch's guard."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        cmd = p.info.get("cmdline") or []
        if p.info.get("status") == psutil.STATUS_ZOMBIE or cmd[1:3] == ["-m", "bootwatch"]:
            continue
        text = " ".join(cmd)
        if not any(k in text for k in ("fake_server.py", "bootwatch/guard.py", "bwtest-")):
            continue
        try:
            if p.environ().get("BOOTWATCH_TEST_SESSION") == SESSION_MARK:
                found.append(p)
        except psutil.Error:
            continue
    return found


@pytest.fixture(autouse=True)
def nothing_of_ours_left():
    yield
    # The guard's own grace (5 s) and SIGKILL come first when bootwatch was killed.
    assert_none_left(ours, "processes of a run", grace_s=12.0)


def fake(log: Path, *extra: str) -> list[str]:
    return [sys.executable, str(HELPER), str(log), *extra]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_run(
    tmp_path: Path, *args: str, server: list[str], pidfile: Path | None = None, **popen: object
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*BOOTWATCH, "run", "--log", str(tmp_path / "r.log"), "--json", *args, "--", *server],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )  # type: ignore[call-overload]


def wait_for(path: Path, timeout: float = 30.0) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def pids_in(pidfile: Path) -> list[int]:
    return [int(x) for x in wait_for(pidfile).split()]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def events_of(out: str) -> list[dict]:
    return [json.loads(x) for x in out.splitlines() if x.strip()]


# ---- stop signals ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sig,code",
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGQUIT, 131)],
    ids=lambda x: str(x),
)
def test_a_stop_signal_stops_the_server_group_and_exits_128_plus_n(tmp_path: Path, sig: int, code: int) -> None:
    pidfile = tmp_path / "pids"
    proc = start_run(
        tmp_path,
        server=fake(
            READY_SGLANG, "--lines", "5", "--then", "hang", "--child", "bwtest-child", "--pidfile", str(pidfile)
        ),
    )
    server = pids_in(pidfile)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert events_of(out)[-1]["event"] == "summary"
    assert gone_within(server, 5.0), "the server or its child outlived bootwatch"


def test_a_second_ctrl_c_skips_the_grace_of_a_server_that_ignores_sigint(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    proc = start_run(
        tmp_path,
        server=fake(READY_SGLANG, "--lines", "5", "--then", "hang", "--sigint", "ignore", "--pidfile", str(pidfile)),
    )
    server = pids_in(pidfile)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert alive(server[0]) and proc.poll() is None, "SIGINT's grace is 10 s: the server is still given time"
    second = time.time()
    proc.send_signal(signal.SIGINT)  # SIGTERM now, not after the 10 s
    proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert not alive(server[0])
    assert time.time() - second < 8.0, "the second Ctrl-C did not cut the 10 s grace short"


def test_sigterm_during_then_stops_the_command_and_the_server(tmp_path: Path) -> None:
    pidfile, thenpid = tmp_path / "pids", tmp_path / "then"
    # The command's own child (a sleep) is in the command's process group: it must go too.
    cmd = (
        f"{sys.executable} -c 'import time; time.sleep(300)' bwtest-then & echo $$ $! > {thenpid}.tmp; "
        f"mv {thenpid}.tmp {thenpid}; wait"
    )
    proc = start_run(tmp_path, "--then", cmd, server=fake(READY_VLLM, "--then", "serve", "--pidfile", str(pidfile)))
    then_pids = pids_in(thenpid)
    server = pids_in(pidfile)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert gone_within(then_pids + server, 5.0), "the --then command or the server outlived bootwatch"
    s = events_of(out)[-1]
    assert s["event"] == "summary" and s["then"]["command"] == cmd


def test_sigkill_of_bootwatch_the_guard_stops_the_whole_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    # The child is the server's, not bootwatch's: PR_SET_PDEATHSIG does not reach it, the guard does.
    proc = start_run(
        tmp_path,
        server=fake(
            READY_SGLANG, "--lines", "5", "--then", "hang", "--child", "bwtest-child", "--pidfile", str(pidfile)
        ),
    )
    server = pids_in(pidfile)
    proc.kill()
    proc.communicate(timeout=30)
    assert gone_within(server, 10.0), "bootwatch was SIGKILLed and the server group lives on"


def test_sigkill_of_bootwatch_with_keep_before_ready_the_guard_stops_the_server(tmp_path: Path) -> None:
    # --keep: no PR_SET_PDEATHSIG (the server may have to outlive bootwatch), so only the guard acts.
    pidfile = tmp_path / "pids"
    proc = start_run(
        tmp_path, "--keep", server=fake(READY_SGLANG, "--lines", "5", "--then", "hang", "--pidfile", str(pidfile))
    )
    server = pids_in(pidfile)
    proc.kill()
    proc.communicate(timeout=30)
    assert gone_within(server, 10.0)


def test_sigkill_of_bootwatch_during_then_stops_the_command(tmp_path: Path) -> None:
    pidfile, thenpid = tmp_path / "pids", tmp_path / "then"
    cmd = (
        f"{sys.executable} -c 'import time; time.sleep(300)' bwtest-then & echo $$ $! > {thenpid}.tmp; "
        f"mv {thenpid}.tmp {thenpid}; wait"
    )
    proc = start_run(tmp_path, "--then", cmd, server=fake(READY_VLLM, "--then", "serve", "--pidfile", str(pidfile)))
    then_pids = pids_in(thenpid)
    server = pids_in(pidfile)
    proc.kill()
    proc.communicate(timeout=30)
    assert gone_within(then_pids + server, 10.0)


def test_detach_and_keep_release_the_guard(tmp_path: Path) -> None:
    for how in (["--detach"], ["--keep", "--then", "true"]):
        pidfile = tmp_path / f"pids{len(how)}"
        p = subprocess.run(
            [
                *BOOTWATCH,
                "run",
                "--log",
                str(tmp_path / f"r{len(how)}.log"),
                *how,
                "--",
                *fake(READY_VLLM, "--then", "serve", "--pidfile", str(pidfile)),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode == 0, p.stderr
        server = pids_in(pidfile)
        try:
            time.sleep(1.5)  # a guard that was not released would have stopped it by now
            assert alive(server[0]), f"{how}: the server was stopped after bootwatch left"
            assert not [g for g in ours() if "bootwatch/guard.py" in " ".join(g.cmdline())], "the guard lingers"
        finally:
            os.killpg(server[0], signal.SIGTERM)
            gone_within(server, 5.0)


def test_stopping_signals_the_group_once_and_a_member_that_left_it(tmp_path: Path) -> None:
    """llama-server takes a second SIGINT as "terminate immediately": the group gets one. A child that left
    the group (setsid) is signalled on its own."""
    pidfile = tmp_path / "pids"
    log = tmp_path / "r.log"
    proc = start_run(
        tmp_path,
        server=fake(
            READY_SGLANG,
            "--lines",
            "5",
            "--then",
            "hang",
            "--sigint",
            "count",
            "--daemon-child",
            "bwtest-daemon",
            "--pidfile",
            str(pidfile),
        ),
    )
    pids = pids_in(pidfile)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode == 130
    text = log.read_text()
    assert "fake_server: SIGINT #1" in text
    assert "SIGINT #2" not in text, "the server got Ctrl-C twice"
    assert gone_within(pids, 5.0), "the child that left the group lives on"


# ---- arguments are checked before anything starts --------------------------------------------------
BAD = [
    (["--url", "localhost:8000/health"], [], "needs http://"),
    (["--url", "http://127.0.0.1:65536/"], [], "1 to 65535"),
    ([], ["--port", "99999"], "not a port"),
    (["--log", "/dev/null"], [], "regular file"),
    (["--log", "/proc/version"], [], "a proc file"),
    (["--log", "{tmp}"], [], "directory"),
    (["--log", "{tmp}/fifo"], [], "FIFO"),
    (["--log", "{tmp}/no-such-dir/x.log"], [], "does not exist"),
    (["--detach", "--then", "true"], [], "choose one"),
]


@pytest.mark.parametrize("args,server_args,message", BAD, ids=[" ".join(a + s) for a, s, _ in BAD])
def test_bad_arguments_exit_2_and_start_nothing(
    tmp_path: Path, args: list[str], server_args: list[str], message: str
) -> None:
    os.mkfifo(tmp_path / "fifo")
    marker = tmp_path / "started"
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if "--log" not in args:
        args += ["--log", str(tmp_path / "r.log")]
    p = subprocess.run(
        [*BOOTWATCH, "run", *args, "--", "sh", "-c", f"touch {marker}", "sh", *server_args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode == 2, p.stderr
    assert message in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    time.sleep(0.3)
    assert not marker.exists(), "the server was started"
    assert not (tmp_path / "no-such-dir").exists()


def test_guessed_url_brackets_an_ipv6_host(tmp_path: Path) -> None:
    port = free_port()
    # The log never says ready: the probe of the URL guessed from --host ::1 --port P must find it.
    code = subprocess.run(
        [
            *BOOTWATCH,
            "run",
            "--log",
            str(tmp_path / "r.log"),
            "--json",
            "--timeout",
            "30",
            "--then",
            "true",
            "--",
            *fake(READY_SGLANG, "--lines", "12", "--then", "serve", "--host", "::1", "--port", str(port)),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert code.returncode == 0, code.stderr
    health = [e for e in events_of(code.stdout) if e["event"] == "fact" and e.get("name") == "health"]
    assert health and health[-1]["url"] == f"http://[::1]:{port}/health" and health[-1]["value"] == "200"


def test_default_log_files_are_unique(tmp_path: Path) -> None:
    runs = [
        subprocess.Popen(
            [*BOOTWATCH, "run", "--json", "--", "echo", "hello"],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    for r in runs:
        r.communicate(timeout=60)
    logs = sorted(tmp_path.glob("bootwatch-echo-*.log"))
    assert len(logs) == 3, logs
    assert [p.read_text() for p in logs] == ["hello\n"] * 3


def test_run_follows_the_file_it_gave_the_server_across_a_logrotate(tmp_path: Path) -> None:
    log = tmp_path / "r.log"
    pidfile = tmp_path / "pids"
    proc = start_run(
        tmp_path,
        "--timeout",
        "30",
        "--then",
        "true",
        server=fake(READY_VLLM, "--scale", "1", "--max-gap", "0.1", "--pidfile", str(pidfile), "--then", "serve"),
    )
    wait_for(pidfile)
    while log.stat().st_size == 0:
        time.sleep(0.01)
    log.rename(tmp_path / "r.log.1")  # logrotate's create mode: rename, then a new empty file
    log.write_bytes(b"")
    assert b"Application startup complete." not in (tmp_path / "r.log.1").read_bytes(), "rotated too late"
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    s = events_of(out)[-1]
    assert s["verdict"] == "ready" and s["ready"]["text"] == "Application startup complete."
    rotated = (tmp_path / "r.log.1").read_bytes()  # where the server went on writing
    assert READY_VLLM.read_bytes().startswith(rotated) and b"Application startup complete." in rotated
    assert log.read_bytes() == b""


# ---- exit codes ------------------------------------------------------------------------------------
def test_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    r, w = os.pipe()
    os.close(r)  # `| head -1` that has already left
    try:
        p = subprocess.run(
            [*BOOTWATCH, "report", str(READY_VLLM)], stdout=w, stderr=subprocess.PIPE, text=True, timeout=60
        )
    finally:
        os.close(w)
    assert p.stderr == "" and p.returncode == 141


# ---- --then is part of the record ------------------------------------------------------------------
def test_then_with_json_keeps_stdout_json_and_records_the_command_last(tmp_path: Path) -> None:
    p = subprocess.run(
        [
            *BOOTWATCH,
            "run",
            "--log",
            str(tmp_path / "r.log"),
            "--json",
            "--then",
            "echo not-json; exit 3",
            "--",
            *fake(READY_VLLM, "--then", "serve"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 3
    events = events_of(p.stdout)  # every line of stdout is JSON
    assert "not-json" in p.stderr
    s = events[-1]
    assert s["event"] == "summary" and s["verdict"] == "ready"
    assert s["then"]["command"] == "echo not-json; exit 3" and s["then"]["exit_code"] == 3
    assert s["then"]["duration_s"] >= 0


def test_then_failure_is_named_in_text_mode(tmp_path: Path) -> None:
    p = subprocess.run(
        [
            *BOOTWATCH,
            "run",
            "--log",
            str(tmp_path / "r.log"),
            "--then",
            "exit 3",
            "--",
            *fake(READY_VLLM, "--then", "serve"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 3 and "--then command exited 3" in p.stdout


def test_watch_then_with_json(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    subprocess.run(fake(READY_VLLM, "--out", str(log), "--scale", "0"), check=True, timeout=60)
    log.write_bytes(b"")  # a fresh launch is written below, while watch follows
    watcher = subprocess.Popen(
        [*BOOTWATCH, "watch", str(log), "--json", "--timeout", "30", "--then", "echo from-then; exit 5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until_open(watcher.pid, log)
    subprocess.run(fake(READY_VLLM, "--out", str(log), "--scale", "0"), check=True, timeout=60)
    out, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 5 and "from-then" in err
    s = events_of(out)[-1]
    assert s["event"] == "summary" and s["then"]["exit_code"] == 5


# ---- a launcher that puts the server in the background and exits 0 (N10) -------------------------
FAILED_SGLANG = CORPUS / "sglang/rocm-rdna4-tp2-oom-during-weight-load-one-rank.log"


def launcher(server: list[str]) -> list[str]:
    """`sh -c 'server & exit 0'`: what a launch script that backgrounds the server does."""
    import shlex

    return ["sh", "-c", f"{shlex.join(server)} & exit 0"]


def test_a_launcher_that_exits_0_leaves_the_server_followed_and_stopped_at_the_end(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    server = fake(READY_VLLM, "--then", "hang", "--pidfile", str(pidfile))
    proc = start_run(tmp_path, "--then", "true", server=launcher(server))
    out, err = proc.communicate(timeout=60)
    events = events_of(out)
    s = events[-1]
    assert (proc.returncode, s["verdict"]) == (0, "ready"), (err, s)
    notes = [e["text"] for e in events if e["event"] == "warning" and e.get("kind") == "bootwatch"]
    assert any("exited 0 while its children run on" in n for n in notes), notes
    assert s["then"]["exit_code"] == 0 and "server_exit" not in json.dumps(s["then"])
    assert gone_within(pids_in(pidfile), 15.0), "the server the launcher left running outlived bootwatch"


def test_a_backgrounded_server_that_fails_is_failed_by_its_log(tmp_path: Path) -> None:
    proc = start_run(tmp_path, server=launcher(fake(FAILED_SGLANG, "--then", "exit:1")))
    out, err = proc.communicate(timeout=60)
    s = events_of(out)[-1]
    assert (proc.returncode, s["verdict"]) == (1, "failed"), (err, s)
    assert s["failure"]["text"].startswith("torch.OutOfMemoryError: CUDA out of memory"), s["failure"]


def test_a_backgrounded_server_that_goes_without_a_word_is_a_death(tmp_path: Path) -> None:
    proc = start_run(tmp_path, server=launcher(fake(READY_VLLM, "--lines", "3", "--then", "exit:0")))
    out, err = proc.communicate(timeout=60)
    s = events_of(out)[-1]
    assert (proc.returncode, s["verdict"]) == (1, "failed"), (err, s)
    assert s["failure"]["text"] == "the processes the launcher left running are gone", s["failure"]


def test_detach_hands_on_the_pid_of_the_server_a_launcher_left_running(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    server = launcher(fake(READY_VLLM, "--then", "hang", "--pidfile", str(pidfile)))
    p = subprocess.run(
        [*BOOTWATCH, "run", "--log", str(tmp_path / "r.log"), "--detach", "--", *server],
        capture_output=True,
        text=True,
        timeout=60,
    )
    pids = pids_in(pidfile)
    try:
        assert p.returncode == 0, p.stderr
        assert f"server pid {pids[0]} runs on" in p.stdout, p.stdout
    finally:
        os.killpg(os.getpgid(pids[0]), signal.SIGTERM)
        assert gone_within(pids, 5.0)
