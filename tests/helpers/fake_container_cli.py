"""Stand-ins for the `docker` and `kubectl` clients (no container engine or cluster runs here).

They replay a REAL corpus log as `logs -f --timestamps` would, and answer `docker inspect` /
`kubectl get pod -o json` from a small state file, so that a test can make the stream end (log rotation),
the container be OOM-killed, or the pod restart. Configured by FAKE_CLI_DIR/config.json:
{"log": PATH, "scenario": "follow" | "rotate" | "oom" | "restart", "split": N}
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

DIR = Path(os.environ["FAKE_CLI_DIR"])
BASE = 1767225600  # 2026-01-01T00:00:00Z


def stamp(i: int) -> str:
    # Several lines share a second: the duplicates a reattach from a timestamp gives back.
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(BASE + i // 3)) + ".000000000Z"


def state() -> dict:
    p = DIR / "state.json"
    return json.loads(p.read_text()) if p.exists() else {"streams": 0, "restarts": 0, "running": True}


def save(st: dict) -> None:
    (DIR / "state.json").write_text(json.dumps(st))


def logs(since: str | None) -> int:
    cfg = json.loads((DIR / "config.json").read_text())
    lines = Path(cfg["log"]).read_bytes().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    st = state()
    st["streams"] += 1
    save(st)
    first = st["streams"] == 1
    split = cfg.get("split", len(lines))
    out = sys.stdout.buffer
    for i, line in enumerate(lines):
        ts = stamp(i)
        if since is not None and ts < since:
            continue
        if first and i >= split and cfg["scenario"] != "follow":
            break
        out.write(ts.encode() + b" " + line + b"\n")
        out.flush()
        time.sleep(0.002)
    if first and cfg["scenario"] in ("oom", "restart"):
        st = state()
        if cfg["scenario"] == "oom":
            st["running"], st["exit"], st["oom"] = False, 137, True
        else:
            st["restarts"] += 1
            st["exit"], st["reason"] = 137, "OOMKilled"
        save(st)
        return 0
    if first and cfg["scenario"] == "rotate":
        return 0  # the stream just ends, the container runs on
    while True:
        time.sleep(3600)


def main() -> int:
    tool = os.environ.get("FAKE_CLI_TOOL") or Path(sys.argv[0]).name
    args = sys.argv[1:]
    (DIR / "calls.log").open("a").write(" ".join([tool, *args]) + "\n")
    if args[:1] == ["logs"]:
        since = None
        for i, a in enumerate(args):
            if a == "--since":
                since = args[i + 1]
            elif a.startswith("--since-time="):
                since = a.split("=", 1)[1]
        return logs(since)
    st = state()
    if tool == "docker" and args[:1] == ["inspect"]:
        print(
            json.dumps({"Running": st["running"], "ExitCode": st.get("exit", 0), "OOMKilled": st.get("oom", False)}),
            st["restarts"],
        )
        return 0
    if tool == "kubectl" and args[:2] == ["get", "pod"]:
        cs = {
            "name": "server",
            "restartCount": st["restarts"],
            "state": {"running": {}}
            if st["running"]
            else {"terminated": {"exitCode": st.get("exit"), "reason": "OOMKilled" if st.get("oom") else "Error"}},
        }
        if st.get("reason"):
            cs["lastState"] = {"terminated": {"exitCode": st["exit"], "reason": st["reason"]}}
        print(json.dumps({"status": {"containerStatuses": [cs]}}))
        return 0
    print(f"fake {tool}: unsupported {args}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
