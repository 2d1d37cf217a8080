"""The docker and kubectl clients' command lines and how each reads its runtime's state, without a process."""

from __future__ import annotations

import json

from bootwatch.sources.container import client_for
from bootwatch.sources.docker import DockerClient
from bootwatch.sources.kubectl import KubectlClient
from bootwatch.sources.spec import parse_source


def test_docker_command_lines() -> None:
    c = client_for(parse_source("docker://vllm"))
    assert c.logs_argv(None) == ["docker", "logs", "-f", "--timestamps", "vllm"]
    assert c.logs_argv("T") == ["docker", "logs", "-f", "--timestamps", "--since", "T", "vllm"]
    assert c.state_argv() == ["docker", "inspect", "--format", "{{json .State}} {{.RestartCount}}", "vllm"]


def test_kubectl_command_lines() -> None:
    c = client_for(parse_source("k8s://inference/sglang-0/server"))
    assert c.logs_argv("T") == [
        "kubectl",
        "logs",
        "-f",
        "--timestamps",
        "-n",
        "inference",
        "--since-time=T",
        "sglang-0",
        "-c",
        "server",
    ]
    assert c.state_argv() == ["kubectl", "get", "pod", "-n", "inference", "sglang-0", "-o", "json"]
    bare = client_for(parse_source("k8s://vllm-0"))
    assert bare.logs_argv(None) == ["kubectl", "logs", "-f", "--timestamps", "vllm-0"]
    assert bare.state_argv() == ["kubectl", "get", "pod", "vllm-0", "-o", "json"]


def docker_out(running: bool, code: int = 0, oom: bool = False, restarts: int = 0) -> str:
    return json.dumps({"Running": running, "ExitCode": code, "OOMKilled": oom}) + f" {restarts}\n"


def test_docker_running_lives_until_its_restart_count_goes_up() -> None:
    c = DockerClient("vllm")
    st = c.read_state(docker_out(True, restarts=2), None)
    assert st.running and st.death is None and st.restarts == 2
    assert c.read_state(docker_out(True, restarts=2), 2).death is None
    died = c.read_state(docker_out(True, 137, restarts=3), 2).death
    assert died is not None and died.code == 137 and "restarted (restart count 3)" in died.reason


def test_docker_exit_and_oom_kill() -> None:
    c = DockerClient("vllm")
    exited = c.read_state(docker_out(False, 1), 0)
    assert not exited.running and exited.death is not None
    death = exited.death
    assert (death.code, death.signal, death.reason) == (1, None, "container vllm exited with code 1")
    oom = c.read_state(docker_out(False, 137, oom=True), 0).death
    assert oom is not None and (oom.signal, oom.reason) == (9, "container vllm OOMKilled")


def pod(*statuses: dict) -> str:
    return json.dumps({"status": {"containerStatuses": list(statuses)}})


def test_kubectl_reads_the_named_container_and_its_last_run() -> None:
    c = KubectlClient("sglang-0", "inference", "server")
    side = {"name": "sidecar", "restartCount": 5, "state": {"terminated": {"exitCode": 1}}}
    server = {
        "name": "server",
        "restartCount": 1,
        "state": {"running": {}},
        "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
    }
    assert c.read_state(pod(side, server), 1).death is None  # the restart was before we looked
    st = c.read_state(pod(side, server), 0)
    assert st.running and st.restarts == 1 and st.death is not None
    assert (st.death.code, st.death.signal) == (137, 9)
    assert st.death.reason == ("pod sglang-0 container server terminated: OOMKilled (exit code 137, restarts 1)")


def test_kubectl_terminated_without_reason_and_missing_container() -> None:
    c = KubectlClient("vllm-0")
    st = c.read_state(pod({"name": "x", "restartCount": 0, "state": {"terminated": {"exitCode": 3}}}), 0)
    assert not st.running and st.death is not None and st.death.signal is None
    assert "terminated: exit code 3 (exit code 3, restarts 0)" in st.death.reason
    missing = KubectlClient("vllm-0", container="server").read_state(pod({"name": "x"}), None)
    assert (missing.running, missing.death, missing.restarts) == (False, None, None)
