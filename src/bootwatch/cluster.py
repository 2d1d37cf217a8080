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
from dataclasses import dataclass, replace
from typing import Any

from bootwatch.durations import fmt_duration
from bootwatch.session import Options, Session
from bootwatch.sinks.protocol import Sink
from bootwatch.tracker import Event, NodeStallEvent, StalledEvent, TimeoutEvent
from bootwatch.tracker.verdict import Outcome, Verdict, cluster_outcome, cluster_verdict, combine, stall_state


@dataclass
class Node:
    name: str
    session: Session
    chunks: AsyncIterator[bytes]
    outcome: Outcome | None = None


def worst(outcomes: list[str]) -> str:
    """--each: ready only if all are; else the most serious outcome."""
    return combine([Outcome(o) for o in outcomes])


class NodeSink:
    """Tags a node's events with its name and hands them to the shared sink."""

    def __init__(self, sink: Sink, name: str) -> None:
        self.sink = sink
        self.name = name

    def event(self, ev: Event, now: float) -> None:
        self.sink.event(replace(ev, node=self.name), now)

    def note(self, now: float, text: str) -> None:
        self.sink.note(now, f"[{self.name}] {text}")

    def close(self, summary: dict[str, Any], now: float) -> None:
        """Nothing: the cluster's summary closes the shared sink, once."""


class Cluster:
    def __init__(self, nodes: list[Node], sink: Sink, opts: Options, each: bool = False) -> None:
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
        waiting = [n for n in self.nodes if n.outcome is None]
        for node in waiting:
            phase = self._phase(node)
            st = stall_state(self.opts.stall_s, phase, now - node.session.last_output)
            if st is None or not st.warn:
                self._stall_warned.discard(node.name)
                continue
            others = "; ".join(f"{o.name} at {self._phase(o)}" for o in self.nodes if o is not node)
            msg = f"{node.name} silent in {phase} for {fmt_duration(st.silent_s)}" + (f"; {others}" if others else "")
            if node.name not in self._stall_warned:
                self._stall_warned.add(node.name)
                self.sink.event(
                    NodeStallEvent(t=now, node=node.name, phase=phase, silent_s=round(st.silent_s, 1), message=msg), now
                )
            if st.stalled:
                self.sink.event(StalledEvent(t=now, node=node.name, phase=phase, message=msg), now)
                return Outcome.STALLED
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
                decided = cluster_outcome([n.outcome for n in self.nodes], self.each)
                if decided is not None:
                    failed = [n for n in self.nodes if n.outcome in (Outcome.FAILED, Outcome.DIED)]
                    self.failed_node = failed[0] if failed and not self.each else None
                    return decided
                if not self.each:
                    stalled = self._stall(now)
                    if stalled:
                        return stalled
                if now - self.start >= self.opts.timeout_s:
                    late = ", ".join(f"{n.name} in {self._phase(n)}" for n in self.nodes if n.outcome is None)
                    message = f"not ready after {fmt_duration(now - self.start)} ({late})"
                    self.sink.event(TimeoutEvent(t=now, message=message), now)
                    return Outcome.TIMEOUT
        finally:
            for node in self.nodes:
                await node.session.stop()

    def summary(self, outcome: str) -> dict[str, Any]:
        fallback = Outcome(outcome) if outcome in (Outcome.TIMEOUT, Outcome.INTERRUPTED) else Outcome.INCOMPLETE
        per = [node.session.summary_of(node.outcome or fallback) for node in self.nodes]
        for node, s in zip(self.nodes, per, strict=True):
            s.extra["node"] = node.name
        verdict = cluster_verdict(Outcome(outcome), [s.verdict for s in per])
        if self.each:
            head = next((s for s in per if s.verdict is not Verdict.READY), per[0])
            return replace(head, verdict=verdict, extra={**head.extra, "servers": [s.to_json() for s in per]}).to_json()
        # The node that failed speaks for the server (its phases, its root cause); else the first node.
        bad = self.failed_node
        head = per[self.nodes.index(bad)] if bad is not None and verdict is Verdict.FAILED else per[0]
        failure = head.failure
        if bad is not None and verdict is Verdict.FAILED:
            failure = {**(failure or {"text": "node failed", "line_no": None, "category": "unknown"}), "node": bad.name}
        nodes = [
            {
                "node": n.name,
                "verdict": s.verdict.value,
                "engine": s.engine,
                "phase": s.phases[-1]["name"] if s.phases else None,
                "failure": s.failure if s.verdict is Verdict.FAILED else None,
            }
            for n, s in zip(self.nodes, per, strict=True)
        ]
        return replace(head, verdict=verdict, failure=failure, extra={**head.extra, "nodes": nodes}).to_json()
