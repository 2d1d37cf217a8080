"""Typed events: one dataclass per kind, and the JSON lines they write (the SPEC's, unchanged)."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest

from bootwatch.cluster import NodeSink
from bootwatch.sinks.events import JsonSink, PlainSink
from bootwatch.sinks.protocol import NullSink
from bootwatch.tracker import (
    EVENT_CLASSES,
    KINDS,
    ActivityEvent,
    EtaEvent,
    Event,
    FactEvent,
    FailedEvent,
    LaunchEvent,
    LineEvent,
    NodeStallEvent,
    PhaseEvent,
    ProgressEvent,
    ProgressSoFarEvent,
    ReadyEvent,
    ServingEvent,
    StalledEvent,
    StallEvent,
    StateEvent,
    TimeoutEvent,
    WarningEvent,
)
from bootwatch.tracker.events import EVENT_TYPES

# One event of each kind, as its producers build it, and the keys of its JSON line in order.
SAMPLES: list[tuple[Event, list[str]]] = [
    (LaunchEvent(t=1.0, line_no=40, launch=2), ["line_no", "launch"]),
    (
        PhaseEvent(t=1.0, name="load_weights", line_no=3, draft=False, text="Loading"),
        ["name", "line_no", "draft", "text"],
    ),
    (ProgressEvent(t=1.0, phase="load_weights", progress=1.0, line_no=9), ["phase", "progress", "line_no"]),
    (
        ProgressEvent(t=1.0, phase="load_weights", n=2, total=4, progress=0.5, line_no=9),
        ["phase", "n", "total", "progress", "line_no"],
    ),
    (
        ProgressSoFarEvent(t=1.0, phase="compile", n=None, total=None, progress=1.0, line_no=124),
        ["phase", "n", "total", "progress", "line_no"],
    ),
    (FactEvent(t=1.0, name="tp_size", value=8, line_no=5), ["name", "value", "line_no"]),
    (FactEvent(t=1.0, name="health", value="200", url="http://h:8000/health"), ["name", "value", "url"]),
    (FactEvent(t=1.0, name="verify_latency_s", value=0.2, ok=True, error=None), ["name", "value", "ok", "error"]),
    (WarningEvent(t=1.0, line_no=77, warning="max_running_requests_reduced", text="..."), ["line_no", "kind", "text"]),
    (
        WarningEvent(
            t=1.0, line_no=90, warning="capacity_cut", text="e. Fix: f", details={"evidence": "e", "fix": "f"}
        ),
        ["line_no", "kind", "text", "evidence", "fix"],
    ),
    (
        StallEvent(t=1.0, phase="distributed_init", silent_s=300.0, message="no output", cpu_percent=None),
        ["phase", "silent_s", "message", "cpu_percent"],
    ),
    (
        NodeStallEvent(t=1.0, phase="distributed_init", silent_s=360.0, message="node2 silent"),
        ["phase", "silent_s", "message"],
    ),
    (
        ActivityEvent(
            t=1.0,
            phase="load_weights",
            silent_s=5.0,
            message="it moves",
            details={
                "read_bps": 1,
                "cpu_cores": 0.5,
                "compilers": [],
                "busiest": None,
                "weights_total_bytes": None,
                "weights_read_bytes": None,
                "eta_s": None,
            },
        ),
        [
            "phase",
            "silent_s",
            "message",
            "read_bps",
            "cpu_cores",
            "compilers",
            "busiest",
            "weights_total_bytes",
            "weights_read_bytes",
            "eta_s",
        ],
    ),
    (ReadyEvent(t=1.0, line_no=812, text="The server is fired up and ready to roll!"), ["line_no", "text"]),
    (ReadyEvent(t=1.0, line_no=None, text="http://h/health answered 200"), ["line_no", "text"]),
    (
        FailedEvent(t=1.0, line_no=640, text="OOM", category="oom", context=["a", "OOM"], runtime=False),
        ["line_no", "text", "category", "context", "runtime"],
    ),
    (
        FailedEvent(
            t=1.0,
            line_no=640,
            text="OOM",
            category="oom",
            context=["OOM"],
            detail="d",
            chain=["A", "B"],
            procs=["TP0", "TP1"],
            runtime=True,
        ),
        ["line_no", "text", "category", "context", "detail", "chain", "procs", "runtime"],
    ),
    (
        FailedEvent(t=1.0, line_no=None, text="timed out", category="warmup", runtime=False),
        ["line_no", "text", "category", "runtime"],
    ),
    (TimeoutEvent(t=1.0, message="not ready after 30m"), ["message"]),
    (StalledEvent(t=1.0, phase="load_weights", message="no output"), ["phase", "message"]),
    (StateEvent(t=1.0, state="failed", phase="load_weights"), ["state", "phase"]),
    (StateEvent(t=1.0, state="ready", phase="ready", time_to_ready_s=31.5), ["state", "phase", "time_to_ready_s"]),
    (LineEvent(t=1.0, text="hello"), ["text"]),
    (
        ServingEvent(
            t=1.0,
            source="log",
            line_no=3,
            reading="decode",
            running=4,
            queued=None,
            gen_tps=None,
            kv_usage=None,
            accept_len=None,
            accept_rate=None,
            preemptions=0,
        ),
        [
            "source",
            "line_no",
            "reading",
            "running",
            "queued",
            "gen_tps",
            "kv_usage",
            "accept_len",
            "accept_rate",
            "preemptions",
        ],
    ),
    (
        ServingEvent(
            t=1.0,
            source="metrics",
            line_no=None,
            reading="scrape",
            running=8,
            queued=0,
            gen_tps=80.0,
            kv_usage=0.1,
            accept_len=None,
            accept_rate=None,
            preemptions=0,
            ranks=2,
        ),
        [
            "source",
            "line_no",
            "reading",
            "running",
            "queued",
            "gen_tps",
            "kv_usage",
            "accept_len",
            "accept_rate",
            "preemptions",
            "ranks",
        ],
    ),
    (
        EtaEvent(t=1.0, phase="load_weights", draft=False, basis="engine+model", n=5, p50_s=250.0, p90_s=360.0),
        ["phase", "draft", "basis", "n", "p50_s", "p90_s"],
    ),
    (
        EtaEvent(t=1.0, phase="start", draft=False, basis="engine", n=3, to_ready_p50_s=60.0, to_ready_p90_s=90.0),
        ["phase", "draft", "basis", "n", "to_ready_p50_s", "to_ready_p90_s"],
    ),
    (
        EtaEvent(
            t=1.0,
            phase="load_weights",
            basis="bytes",
            eta_s=70.0,
            read_bps=1e8,
            weights_read_bytes=None,
            weights_total_bytes=10**10,
            progress=0.0,
        ),
        ["phase", "basis", "eta_s", "read_bps", "weights_read_bytes", "weights_total_bytes", "progress"],
    ),
]


@pytest.mark.parametrize(("ev", "keys"), SAMPLES, ids=lambda x: type(x).__name__ if isinstance(x, Event) else "")
def test_each_event_writes_the_keys_it_always_did(ev: Event, keys: list[str]) -> None:
    line = ev.to_json(1234.56789)
    assert list(line) == ["t", "event", *keys]
    assert line["t"] == 1234.568 and line["event"] == ev.kind
    assert json.loads(json.dumps(line)) == line


@pytest.mark.parametrize(("ev", "keys"), SAMPLES, ids=lambda x: type(x).__name__ if isinstance(x, Event) else "")
def test_node_is_only_there_when_set_and_comes_first(ev: Event, keys: list[str]) -> None:
    assert "node" not in ev.to_json(0.0)
    tagged = dataclasses.replace(ev, node="node2")
    assert list(tagged.payload()) == ["node", *keys] and tagged.payload()["node"] == "node2"
    assert ev.node is None  # replace made a copy


def _all_event_classes(cls: type[Event] = Event) -> set[type[Event]]:
    out: set[type[Event]] = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _all_event_classes(sub)
    return out


def test_every_event_class_has_a_sample() -> None:
    assert {type(ev) for ev, _ in SAMPLES} == _all_event_classes()


def test_kinds_are_unique_and_in_the_registry() -> None:
    kinds = [cls.kind for cls in EVENT_TYPES]
    assert len(kinds) == len(set(kinds)) and all(kinds)
    assert tuple(kinds) == KINDS and set(EVENT_CLASSES) == set(kinds)
    assert all(EVENT_CLASSES[cls.kind] is cls for cls in EVENT_TYPES)
    # A class not in the registry refines one that is, with its kind (a snapshot's progress, a node's stall).
    for cls in _all_event_classes() - set(EVENT_TYPES):
        assert issubclass(cls, EVENT_CLASSES[cls.kind]), cls
    # The SPEC's kinds are all there.
    assert {"phase", "progress", "fact", "warning", "stall", "state", "ready", "failed", "timeout", "stalled"} <= set(
        KINDS
    )


def test_a_warnings_own_kind_is_written_as_kind_and_built_from_the_summarys_dict() -> None:
    w = {"line_no": 3, "kind": "capacity_cut", "text": "t", "evidence": "e", "fix": "f"}
    ev = WarningEvent.of(9.0, w)
    assert ev.kind == "warning" and ev.warning == "capacity_cut" and ev.details == {"evidence": "e", "fix": "f"}
    assert ev.payload() == w and list(ev.payload()) == list(w)


def test_optional_keys_follow_their_group() -> None:
    # A verify fact keeps "error": null; a fact from the log has no ok/error at all.
    assert FactEvent(t=0, name="verify_latency_s", value=0.1, ok=True).payload()["error"] is None
    assert "error" not in FactEvent(t=0, name="tp_size", value=8, line_no=3).payload()
    # An ETA from history has none of the bytes keys.
    assert "read_bps" not in EtaEvent(t=0, phase="x", basis="engine", n=1, p50_s=1.0, p90_s=2.0).payload()


def test_node_sink_tags_a_copy_and_the_json_sink_leaves_live_only_lines_out() -> None:
    inner = NullSink()
    ev = PhaseEvent(t=1.0, name="load_weights", line_no=3, draft=False, text="x")
    NodeSink(inner, "node1").event(ev, 2.0)
    assert inner.events == [dataclasses.replace(ev, node="node1")] and ev.node is None

    out = io.StringIO()
    sink = JsonSink(out)
    sink.event(LineEvent(t=1.0, text="a log line"), 2.0)
    sink.event(inner.events[0], 2.0)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert lines == [
        {"t": 2.0, "event": "phase", "node": "node1", "name": "load_weights", "line_no": 3, "draft": False, "text": "x"}
    ]


def test_the_plain_sink_reads_typed_fields() -> None:
    out = io.StringIO()
    sink = PlainSink(out)
    for ev in (
        PhaseEvent(t=1.0, name="load_weights", line_no=3, draft=True, text="x", node="n1"),
        ProgressEvent(t=1.0, phase="load_weights", n=1, total=2, progress=0.5, line_no=4),
        WarningEvent(t=1.0, line_no=5, warning="slow", text="it is slow"),
        FailedEvent(t=1.0, line_no=6, text="OOM", category="oom", context=[], runtime=False),
        StalledEvent(t=1.0, phase="load_weights", message="nothing moves"),
        LineEvent(t=1.0, text="never printed"),
    ):
        sink.event(ev, 0.0)
    text = out.getvalue()
    assert "[n1] phase load_weights (draft model)  (line 3)" in text
    assert "progress load_weights 1/2 50%" in text
    assert "warning slow: it is slow  (line 5)" in text
    assert "FAILED during startup (oom, line 6): OOM" in text
    assert "STALLED: nothing moves" in text
    assert "never printed" not in text
