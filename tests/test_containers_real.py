"""docker:// against real containers: podman (through a `docker` shim on PATH, as podman-docker would
install) running a busybox image built here from Debian's busybox-static (no registry is reachable). The
containers print real recorded startup logs, then are left running, OOM-killed under a memory limit, or
restarted by their restart policy. scripts/container-engine installs what this needs; without it (or where
no container can start here) the tests skip and say why."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import CORPUS

pytestmark = pytest.mark.slow
READY_VLLM = CORPUS / "vllm/v0.11-elloraa-gloo-ready.log"
IMAGE = "localhost/bootwatch-test-busybox:1"
# This host's runc is given explicitly (crun refuses the hybrid cgroup layout); the ulimits are lowered
# because the host refuses to raise them inside the container (setrlimit: operation not permitted).
PODMAN = ["podman", "--runtime", "runc"]
RUN = ["run", "-d", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", "-e", "PATH=/bin"]


# podman's conmon leaves its marker files (an "oom" file after an OOM kill) in the working directory it was
# started from: never the checkout.
SCRATCH = tempfile.gettempdir()


def _podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PODMAN, *args], capture_output=True, text=True, timeout=timeout, cwd=SCRATCH)


def _build_image(tmp: Path) -> None:
    root = tmp / "rootfs"
    (root / "bin").mkdir(parents=True)
    shutil.copy2("/bin/busybox", root / "bin" / "busybox")
    names = subprocess.run(["/bin/busybox", "--list"], capture_output=True, text=True, check=True).stdout.split()
    for name in names:
        if name != "busybox":
            os.symlink("busybox", root / "bin" / name)
    (root / "tmp").mkdir()
    shutil.copy2(READY_VLLM, root / "ready.log")
    with tarfile.open(tmp / "rootfs.tar", "w") as tar:
        tar.add(root, arcname=".")
    p = _podman("import", "-q", str(tmp / "rootfs.tar"), IMAGE)
    if p.returncode != 0:
        pytest.skip(f"podman import failed: {p.stderr.strip()}")


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment for bootwatch: PATH with a `docker` that is podman."""
    if not (shutil.which("podman") and shutil.which("runc") and os.path.exists("/bin/busybox")):
        pytest.skip("no container engine: run scripts/container-engine prepare (podman, runc, busybox-static)")
    tmp = tmp_path_factory.mktemp("containers")
    _build_image(tmp)
    probe = _podman("run", "--rm", *RUN[2:], IMAGE, "/bin/echo", "ok", timeout=60)
    if probe.returncode != 0 or probe.stdout.strip() != "ok":
        pytest.skip(f"podman cannot run a container here: {probe.stderr.strip()[:300]}")
    shim = tmp / "shim"
    shim.mkdir()
    (shim / "docker").write_text(f'#!/bin/sh\nexec {" ".join(PODMAN)} "$@"\n')
    (shim / "docker").chmod(0o755)
    yield {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}", "BOOTWATCH_HOME": str(tmp / "home")}


@pytest.fixture
def container(engine: dict[str, str]) -> Iterator[str]:
    name = f"bwtest-{uuid.uuid4().hex[:8]}"
    yield name
    _podman("rm", "-f", "-t", "0", name)


def start(name: str, script: str, *opts: str) -> None:
    p = _podman(*RUN, "--name", name, *opts, IMAGE, "/bin/sh", "-c", script)
    assert p.returncode == 0, p.stderr


def watch(env: dict[str, str], name: str, *extra: str) -> tuple[int, dict, str]:
    p = subprocess.run(
        [sys.executable, "-m", "bootwatch", "watch", f"docker://{name}", "--json", "--timeout", "90", *extra],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=SCRATCH,
    )
    assert "Traceback" not in p.stderr, p.stderr
    events = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    assert events and events[-1]["event"] == "summary", (p.stdout[-2000:], p.stderr[-2000:])
    return p.returncode, events[-1], p.stdout


PLAY = 'while IFS= read -r l; do echo "$l"; usleep 2000; done < /ready.log'


def test_a_real_container_startup_is_ready(engine: dict[str, str], container: str) -> None:
    start(container, f"{PLAY}; sleep 3600")
    code, s, _ = watch(engine, container)
    assert code == 0 and s["verdict"] == "ready" and s["engine"] == "vllm"
    assert "load_weights" in [p["name"] for p in s["phases"]]


def test_oom_kill_under_a_memory_limit_is_a_failure(engine: dict[str, str], container: str) -> None:
    # The first 60 lines of a real vLLM startup, then the "weights" outgrow the container's 32 MiB.
    script = "head -n 60 /ready.log; sleep 1; x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo never"
    start(container, script, "--memory", "32m", "--memory-swap", "32m")
    code, s, _ = watch(engine, container)
    assert code == 1 and s["verdict"] == "failed", s
    text = s["failure"]["text"]
    # podman on cgroup v1 may not set OOMKilled; the kernel's SIGKILL shows as exit code 137 either way.
    assert "OOMKilled" in text or "137" in text or "SIGKILL" in text, text


def test_a_restart_by_the_restart_policy_is_a_death(engine: dict[str, str], container: str) -> None:
    # First run: starts, then dies (exit 3); the policy restarts it, and the second run hangs in its start.
    script = (
        "if [ -e /tmp/ran ]; then head -n 5 /ready.log; sleep 3600; fi; touch /tmp/ran; "
        "head -n 40 /ready.log; sleep 2; echo 'RuntimeError: engine core died' >&2; exit 3"
    )
    start(container, script, "--restart", "on-failure:2")
    code, s, _ = watch(engine, container)
    assert code == 1 and s["verdict"] == "failed", s
    # The restart ends the launch, seen while the second run is still starting.
    # (or, if bootwatch looked between the death and the restart, the exit itself)
    text = s["failure"]["text"]
    assert "restarted (restart count 1)" in text or "exited with code 3" in text, s["failure"]


def test_logs_of_a_container_that_already_ended(engine: dict[str, str], container: str) -> None:
    start(container, f"{PLAY}; exit 0")
    deadline = time.time() + 60
    while (
        time.time() < deadline and "exited" not in _podman("inspect", "--format", "{{.State.Status}}", container).stdout
    ):
        time.sleep(0.2)
    code, s, _ = watch(engine, container)
    # The whole log was there: its ready line counts, and then the clean exit of a ready server.
    assert s["engine"] == "vllm" and s["verdict"] == "ready", s
