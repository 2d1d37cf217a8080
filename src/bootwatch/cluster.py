"""Several SOURCEs at once: one server spread over several nodes, or (--each) independent servers.

One server across nodes (SGLang --nnodes, vLLM with Ray): any node failing fails it, named with its
root-cause line; it is ready when the first SOURCE is ready; a node that stays silent while the others move
on is the stall it is ("node2 silent in distributed_init for 6m00s; node1 at load_weights"). With --each,
every source is its own server and the exit is 0 only when all of them are ready.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from bootwatch.session import STALL_FACTOR, Options, Session
from bootwatch.durations import fmt_duration
from bootwatch.tracker import Event


@dataclass
class Node:
    name: str
    session: Session
    chunks: AsyncIterator[bytes]
    outcome: str | None = None


def worst(outcomes: list[str]) -> str:
    """--each: ready only if all are; else the most serious outcome (a failure before a stall or timeout)."""
    for kind in ("failed", "died", "stalled", "timeout", "incomplete"):
        if kind in outcomes:
            return "failed" if kind == "died" else kind
    return "ready"


class NodeSink:
    """Tags a node's events with its name and hands them to the shared sink."""

    def __init__(self, sink: Any, name: str) -> None:
        self.sink = sink
        self.name = name

    def event(self, ev: Event, now: float) -> None:
        self.sink.event(Event(ev.kind, ev.t, {"node": self.name, **ev.data}), now)

    def note(self, now: float, text: str) -> None:
        self.sink.note(now, f"[{self.name}] {text}")


class Cluster:
    def __init__(self, nodes: list[Node], sink: Any, opts: Options, each: bool = False) -> None:
        self.nodes = nodes
        self.sink = sink
        self.opts = opts
        self.each = each
        self.start = time.time()
        self.failed_node: Node | None = None
        self._stall_warned: set[str] = set()

    def _phase(self, node: Node) -> str:
        return node.session._phase()

    def _stall(self, now: float) -> str | None:
        if self.opts.stall_s is None:
            return None
        waiting = [n for n in self.nodes if n.outcome is None]
        for node in waiting:
            phase = self._phase(node)
            limit = self.opts.stall_s * STALL_FACTOR.get(phase, 1.0)
            silent = now - node.session.last_output
            if silent < limit / 2:
                self._stall_warned.discard(node.name)
                continue
            others = "; ".join(f"{o.name} at {self._phase(o)}" for o in self.nodes if o is not node)
            msg = f"{node.name} silent in {phase} for {fmt_duration(silent)}" + (f"; {others}" if others else "")
            if node.name not in self._stall_warned:
                self._stall_warned.add(node.name)
                self.sink.event(Event("stall", now, {"node": node.name, "phase": phase, "silent_s": round(silent, 1),
                                                     "message": msg}), now)
            if silent >= limit:
                self.sink.event(Event("stalled", now, {"node": node.name, "phase": phase, "message": msg}), now)
                return "stalled"
        return None

    async def run(self) -> str:
        wake = asyncio.Event()
        for node in self.nodes:
            node.session.wake = wake  # any node's news wakes the whole cluster
            node.session.begin(node.chunks)
        try:
            while True:
                await self.nodes[0].session.wait_for_wake()
                now = time.time()
                for node in self.nodes:
                    if node.outcome is None:
                        node.outcome = await node.session.tick(now)
                if self.each:
                    if all(n.outcome is not None for n in self.nodes):
                        return worst([n.outcome or "incomplete" for n in self.nodes])
                else:
                    failed = [n for n in self.nodes if n.outcome in ("failed", "died")]
                    if failed:
                        self.failed_node = failed[0]
                        return "failed"
                    if self.nodes[0].outcome == "ready":
                        return "ready"
                    stalled = self._stall(now)
                    if stalled:
                        return stalled
                if now - self.start >= self.opts.timeout_s:
                    late = ", ".join(f"{n.name} in {self._phase(n)}" for n in self.nodes if n.outcome is None)
                    self.sink.event(Event("timeout", now, {"message": f"not ready after "
                                                           f"{fmt_duration(now - self.start)} ({late})"}), now)
                    return "timeout"
        finally:
            for node in self.nodes:
                await node.session.stop()

    def summary(self, outcome: str) -> dict[str, Any]:
        per = []
        for node in self.nodes:
            own = node.outcome or ("timeout" if outcome == "timeout" else "incomplete")
            s = node.session.summary(own if own in ("ready", "failed", "stalled", "timeout", "incomplete")
                                     else "failed" if own == "died" else own)
            s["node"] = node.name
            per.append(s)
        if self.each:
            head = next((s for s in per if s["verdict"] != "ready"), per[0])
            return {**head, "verdict": outcome, "servers": per}
        # The node that failed speaks for the server (its phases, its root cause); else the first node.
        bad = per[self.nodes.index(self.failed_node)] if outcome == "failed" and self.failed_node else None
        head = dict(bad or per[0])
        head["verdict"] = outcome
        if bad is not None and self.failed_node is not None:
            head["failure"] = {**(bad.get("failure") or {"text": "node failed", "line_no": None,
                                                          "category": "unknown"}), "node": self.failed_node.name}
        elif outcome != "failed":
            head["failure"] = None
        if outcome != "ready":
            head["ready"] = None
        head["nodes"] = [{"node": s["node"], "verdict": s["verdict"], "engine": s["engine"],
                          "phase": (s["phases"][-1]["name"] if s["phases"] else None),
                          "failure": s.get("failure")} for s in per]
        return head
