"""Several sources watched together: the cluster's own decisions.

One server over several nodes (SGLang --nnodes, vLLM with Ray): any node failing fails it; it is ready when
the first node (the one serving HTTP) is; a node that stays silent while the others move on is the stall it
is ("node2 silent in distributed_init for 6m00s; node1 at load_weights"); and the whole has one timeout.
With --each every source is its own server, decided when all are. Each node's own machine decides the node;
this machine is fed what each node says and decides the cluster, and only it emits the cluster's `stalled`,
`timeout` and `state` events.
"""

from __future__ import annotations

from dataclasses import dataclass

from bootwatch.durations import fmt_duration
from bootwatch.tracker.events import Event, NodeStallEvent, StalledEvent, StateEvent, TimeoutEvent
from bootwatch.tracker.verdict.outcomes import Outcome, State, Verdict
from bootwatch.tracker.verdict.stall import stall_state


@dataclass(frozen=True)
class NodeSays:
    """One node at one look: its phase, since when it has been quiet, and its own outcome (None: undecided)."""

    node: str
    phase: str
    quiet_since: float
    outcome: Outcome | None


class ClusterMachine:
    def __init__(self, stall_s: float | None, timeout_s: float, start: float, each: bool = False) -> None:
        self.stall_s = stall_s
        self.timeout_s = timeout_s
        self.start = start
        self.each = each
        self.outcome: Outcome | None = None
        self.failed_node: str | None = None  # the node that failed the server (not with --each)
        self._stall_warned: set[str] = set()

    def feed(self, t: float, nodes: list[NodeSays]) -> list[Event]:
        """Every node at time `t`, in order (the first serves HTTP); the events the cluster decided."""
        if self.outcome is not None:
            return []
        out: list[Event] = []
        decided = cluster_outcome([n.outcome for n in nodes], self.each)
        if decided is not None:
            failed = [n for n in nodes if n.outcome in (Outcome.FAILED, Outcome.DIED)]
            self.failed_node = failed[0].node if failed and not self.each else None
            self._end(decided, t, "", out)
            return out
        if not self.each:
            self._stall(t, nodes, out)
            if self.outcome is not None:
                return out
        if t - self.start >= self.timeout_s:
            late = ", ".join(f"{n.node} in {n.phase}" for n in nodes if n.outcome is None)
            out.append(TimeoutEvent(t=t, message=f"not ready after {fmt_duration(t - self.start)} ({late})"))
            self._end(Outcome.TIMEOUT, t, "", out)
        return out

    def _end(self, outcome: Outcome, t: float, phase: str, out: list[Event]) -> None:
        self.outcome = outcome
        state = State.FAILED if outcome is Outcome.DIED else State(outcome.value)
        out.append(StateEvent(t=t, state=state.value, phase=phase))

    def _stall(self, t: float, nodes: list[NodeSays], out: list[Event]) -> None:
        for node in nodes:
            if node.outcome is not None:
                continue
            st = stall_state(self.stall_s, node.phase, t - node.quiet_since)
            if st is None or not st.warn:
                self._stall_warned.discard(node.node)
                continue
            others = "; ".join(f"{o.node} at {o.phase}" for o in nodes if o is not node)
            msg = f"{node.node} silent in {node.phase} for {fmt_duration(st.silent_s)}" + (
                f"; {others}" if others else ""
            )
            if node.node not in self._stall_warned:
                self._stall_warned.add(node.node)
                out.append(
                    NodeStallEvent(t=t, node=node.node, phase=node.phase, silent_s=round(st.silent_s, 1), message=msg)
                )
            if st.stalled:
                out.append(StalledEvent(t=t, node=node.node, phase=node.phase, message=msg))
                self._end(Outcome.STALLED, t, node.phase, out)
                return


def cluster_outcome(outcomes: list[Outcome | None], each: bool) -> Outcome | None:
    """Several sources. One server over several nodes: any node failing fails it, and it is ready when the
    first node (the one serving HTTP) is. --each: every source is its own server, decided when all are."""
    if each:
        return combine(outcomes) if all(o is not None for o in outcomes) else None
    if any(o in (Outcome.FAILED, Outcome.DIED) for o in outcomes):
        return Outcome.FAILED
    if outcomes and outcomes[0] is Outcome.READY:
        return Outcome.READY
    return None


def cluster_verdict(outcome: Outcome, nodes: list[Verdict]) -> Verdict:
    """The verdict of several sources watched together, from how the watch ended and each node's own."""
    if outcome in (Outcome.READY, Outcome.STOPPED):
        return Verdict.READY
    if outcome in (Outcome.FAILED, Outcome.DIED):
        return Verdict.FAILED
    if outcome is Outcome.INTERRUPTED:
        if Verdict.FAILED in nodes:
            return Verdict.FAILED
        return Verdict.READY if nodes and nodes[0] is Verdict.READY else Verdict.INCOMPLETE
    return Verdict(outcome.value)


def cluster_state(outcome: Outcome, verdict: Verdict) -> State:
    """The cluster's `outcome` in its summary: the machine's, or (interrupted) what its verdict says so far."""
    if outcome is Outcome.INTERRUPTED:
        return {Verdict.READY: State.READY, Verdict.FAILED: State.FAILED}.get(verdict, State.STARTING)
    return State.FAILED if outcome is Outcome.DIED else State(outcome.value)


def combine(outcomes: list[Outcome | None]) -> Outcome:
    """--each: ready only if all are; else the most serious outcome (a failure before a stall or a timeout)."""
    for kind in (Outcome.FAILED, Outcome.DIED, Outcome.STALLED, Outcome.TIMEOUT, Outcome.INCOMPLETE):
        if kind in outcomes:
            return Outcome.FAILED if kind is Outcome.DIED else kind
    if None in outcomes:
        return Outcome.INCOMPLETE
    return Outcome.READY


__all__ = ["ClusterMachine", "NodeSays", "cluster_outcome", "cluster_state", "cluster_verdict", "combine"]
