"""What a SOURCE argument names: a local file, a file on another host (ssh), a container, a pod."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from bootwatch.errors import UsageError

_SSH_URL = re.compile(r"^ssh://(?:(?P<user>[^@/\s]+)@)?(?P<host>\[[^\]]+\]|[^:/\s]+)(?::(?P<port>\d+))?(?P<path>/.*)$")
_SCP = re.compile(r"^(?:(?P<user>[^@/\s:]+)@)?(?P<host>[A-Za-z0-9][\w.\-]*):(?P<path>/.*)$")
_DOCKER = re.compile(r"^docker://(?P<container>[\w][\w.\-]*)$")
_K8S = re.compile(
    r"^k8s://(?:(?P<ns>[a-z0-9][a-z0-9\-]*)/)?(?P<pod>[a-z0-9][a-z0-9.\-]*)(?:/(?P<container>[a-z0-9][a-z0-9\-]*))?$"
)


@dataclass(frozen=True)
class Spec:
    kind: str  # a scheme's kind (sources/registry.py): file, ssh, docker, k8s, journald
    text: str  # as the user wrote it
    path: str = ""
    host: str = ""
    user: str | None = None
    port: int | None = None
    container: str | None = None
    namespace: str | None = None
    pod: str | None = None

    @property
    def label(self) -> str:
        """Short name for a node row: the host for ssh, the container or pod, else the file."""
        if self.kind == "ssh":
            return self.host
        if self.kind == "docker":
            return self.container or self.text
        if self.kind == "k8s":
            return self.pod or self.text
        return self.text


def parse_source(text: str) -> Spec:
    """What `text` names: a registered scheme (sources/registry.py), else scp-style ssh, else a local file."""
    from bootwatch.sources.registry import parse_source as parse

    return parse(text)


def parse_ssh_url(text: str) -> Spec:
    m = _SSH_URL.match(text)
    if m and ":" in (m.group("user") or ""):
        # ssh takes no password on its command line: it would end up in the user name, shown by `ps`.
        who = m.group("user").split(":", 1)[0]
        raise UsageError(
            f"ssh source ssh://{who}:***@...: a password in an ssh URL is not accepted (every user can read it"
            " in `ps`); use a key or ssh-agent, and ssh://USER@HOST/PATH"
        )
    if not m:
        raise UsageError(f"bad ssh source {text!r}: expected ssh://[user@]host[:port]/absolute/path")
    return Spec(
        "ssh",
        text,
        path=m.group("path"),
        host=m.group("host").strip("[]"),
        user=m.group("user"),
        port=int(m.group("port")) if m.group("port") else None,
    )


def parse_container(text: str) -> Spec:
    """docker://CONTAINER or k8s://[namespace/]pod[/container]."""
    if text.startswith("docker://"):
        m = _DOCKER.match(text)
        if not m:
            raise UsageError(f"bad docker source {text!r}: expected docker://CONTAINER")
        return Spec("docker", text, container=m.group("container"))
    m = _K8S.match(text)
    if not m:
        raise UsageError(f"bad k8s source {text!r}: expected k8s://[namespace/]pod[/container]")
    return Spec("k8s", text, namespace=m.group("ns"), pod=m.group("pod"), container=m.group("container"))


def parse_unprefixed(text: str) -> Spec:
    """No scheme: host:/path is a file over ssh (unless a local file has that name), else a local file."""
    m = _SCP.match(text)
    if m and not os.path.exists(text):  # a local file may have a colon in its name
        return Spec("ssh", text, path=m.group("path"), host=m.group("host"), user=m.group("user"))
    return Spec("file", text, path=text)
