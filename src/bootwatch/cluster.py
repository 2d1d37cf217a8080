"""Several SOURCEs at once: one server spread over several nodes, or (--each) independent servers.

One server across nodes (SGLang --nnodes, vLLM with Ray): any node failing fails it, named with its
root-cause line; it is ready when the first SOURCE is ready; a node that stays silent while the others move
on is the stall it is ("node2 silent in distributed_init for 6m00s; node1 at load_weights"). With --each,
every source is its own server and the exit is 0 only when all of them are ready.

This module only runs the nodes: what the whole is decided by `tracker/verdict/cluster.py`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any

from bootwatch.session import Options, Session
from bootwatch.sinks.protocol import Sink
from bootwatch.tracker import Event
from bootwatch.tracker.parts import Failure
from bootwatch.tracker.summary import Summary
from bootwatch.tracker.verdict import (
    ClusterMachine,
    NodeSays,
    Outcome,
    Verdict,
    cluster_state,
    cluster_verdict,
    combine,
)


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
    """The orchestration: every node's session ticks on one wake-up, and the cluster machine
    (tracker/verdict/cluster.py) decides the whole from what each node says."""

    def __init__(
        self, nodes: list[Node], sink: Sink, opts: Options, each: bool = False, clock: Callable[[], float] = time.time
    ) -> None:
        self.nodes = nodes
        self.clock = clock  # the wall clock: the nodes' sessions read the same one
        self.sink = sink
        self.opts = opts
        self.each = each
        self.start = self.clock()
        self.machine = ClusterMachine(opts.stall_s, opts.timeout_s, self.start, each)

    @property
    def failed_node(self) -> Node | None:
        return next((n for n in self.nodes if n.name == self.machine.failed_node), None)

    def _says(self, node: Node, now: float) -> NodeSays:
        s = node.session
        return NodeSays(node.name, s._phase(), s.last_output, node.outcome)

    async def run(self) -> str:
        wake = asyncio.Event()
        for node in self.nodes:
            node.session.wake = wake  # any node's news wakes the whole cluster
            node.session.begin(node.chunks)
        try:
            while True:
                await self.nodes[0].session.wait_for_wake()
                now = self.clock()
                for node in self.nodes:
                    if node.outcome is None:
                        node.outcome = await node.session.tick(now)
                for ev in self.machine.feed(now, [self._says(n, now) for n in self.nodes]):
                    self.sink.event(ev, now)
                if self.machine.outcome is not None:
                    return self.machine.outcome
        finally:
            for node in self.nodes:
                await node.session.stop()

    def summary(self, outcome: str) -> dict[str, Any]:
        return self.summary_of(Outcome(outcome)).to_json()

    def summary_of(self, outcome: Outcome) -> Summary:
        fallback = outcome if outcome in (Outcome.TIMEOUT, Outcome.INTERRUPTED) else Outcome.INCOMPLETE
        per = [replace(node.session.summary_of(node.outcome or fallback), node=node.name) for node in self.nodes]
        verdict = cluster_verdict(outcome, [s.verdict for s in per])
        state = cluster_state(outcome, verdict)
        if self.each:
            head = next((s for s in per if s.verdict is not Verdict.READY), per[0])
            servers = [s.to_json() for s in per]
            return replace(head, verdict=verdict, outcome=state, details={**head.details, "servers": servers})
        # The node that failed speaks for the server (its phases, its root cause); else the first node.
        bad = self.failed_node
        head = per[self.nodes.index(bad)] if bad is not None and verdict is Verdict.FAILED else per[0]
        failure = head.failure if verdict is Verdict.FAILED else None
        if bad is not None and verdict is Verdict.FAILED:
            failure = Failure.of_node(bad.name) if failure is None else failure.on_node(bad.name)
        nodes = [
            {
                "node": n.name,
                "verdict": s.verdict.value,
                "engine": s.engine,
                "phase": s.phases[-1]["name"] if s.phases else None,
                "failure": None if s.failure is None else s.failure.to_json(),
            }
            for n, s in zip(self.nodes, per, strict=True)
        ]
        ready = head.ready if verdict is Verdict.READY else None
        return replace(
            head,
            verdict=verdict,
            outcome=state,
            ready=ready,
            failure=failure,
            runtime_failure=head.runtime_failure if verdict is Verdict.READY else None,
            time_to_ready_s=head.time_to_ready_s if verdict is Verdict.READY else None,
            details={**head.details, "nodes": nodes},
        )
