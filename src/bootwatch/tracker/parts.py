"""The typed parts of a verdict: the line (or probe answer) that made a startup ready, and a root cause.

A leaf module (it imports nothing of bootwatch): the tracker builds these from the lines, the verdict machine
carries the ones it accepted into its events and the summary, and the JSON is made from them at the edge.
Every failure the summary or the stream shows is a `Failure`, whoever found it: the log's root cause, a
failed verification, a cluster's node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

# A line the terminal and the JSON show whole up to this many characters: above the longest real root cause in
# the corpus (a 5.4 KB pydantic validation error), far below a 500 KB exception message a server may print.
# Longer, it keeps its start and its end (where an exception's message says what it is) and says what was cut.
SHOWN_MAX = 8192
_HEAD, _TAIL = 6000, 1500
_WORD_END, _WORD_START = re.compile(r"\S+\Z"), re.compile(r"\A\S+")
_KNOWABLE = 40  # characters of a word from which redaction can tell a secret (the shortest tokens it knows are shorter)


def clip(text: str) -> str:
    """`text`, or its head and tail with the number of characters cut between them."""
    if len(text) <= SHOWN_MAX:
        return text
    head, tail = text[:_HEAD], text[-_TAIL:]
    # A secret cut in two loses, in its second part, the prefix ("hf_", "sk-") by which redaction knows it: the part
    # of a word the tail would begin with goes with the cut. The head keeps its last word's start (redaction knows a
    # secret by it) unless that is too short to know, as a few characters of a token are.
    if not text[-_TAIL - 1].isspace():
        tail = _WORD_START.sub("", tail)
    if not text[_HEAD].isspace() and (m := _WORD_END.search(head)) is not None and len(m.group()) < _KNOWABLE:
        head = head[: m.start()]
    cut = len(text) - len(head) - len(tail)
    return f"{head} [... {cut:,} characters cut ...] {tail}"


def _clip_all(texts: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(clip(t) for t in texts)


@dataclass(frozen=True)
class Ready:
    """What said ready: a log line (`line_no`), or the probe (`line_no` None, `text` names the URL)."""

    line_no: int | None
    text: str
    how: str | None = None  # what the readiness rests on, when its rule says ("engine unknown, ready by ...")

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", clip(self.text))

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"line_no": self.line_no, "text": self.text}
        if self.how:
            d["how"] = self.how
        return d


@dataclass(frozen=True)
class Failure:
    """A root cause: the SPEC's `failure` (and `runtime_failure`) object."""

    line_no: int | None  # None: nothing in the log to point at (a failed verification, a silent death)
    text: str
    category: str = "unknown"
    context: tuple[str, ...] = ()
    detail: str | None = None
    chain: tuple[str, ...] = ()  # the chained exceptions, when more than one
    procs: tuple[str, ...] = ()  # the processes that died of the same thing
    node: str | None = None  # the cluster node it came from

    def __post_init__(self) -> None:
        # Every failure the terminal, the JSON and the history show is built here: capped once, here.
        object.__setattr__(self, "text", clip(self.text))
        object.__setattr__(self, "context", _clip_all(tuple(self.context)))
        object.__setattr__(self, "chain", _clip_all(tuple(self.chain)))
        if self.detail is not None:
            object.__setattr__(self, "detail", clip(self.detail))

    def to_json(self) -> dict[str, Any]:
        """The SPEC's shape: `line_no`, `text`, `category`, `context`, and the optional keys only when set."""
        d: dict[str, Any] = {
            "line_no": self.line_no,
            "text": self.text,
            "category": self.category,
            "context": list(self.context),
        }
        if self.detail:
            d["detail"] = self.detail
        if len(self.chain) > 1:
            d["chain"] = list(self.chain)
        if self.procs:
            d["procs"] = list(self.procs)
        if self.node is not None:
            d["node"] = self.node
        return d

    def on_node(self, node: str) -> Failure:
        return replace(self, node=node)

    @classmethod
    def of_verify(cls, error: str) -> Failure:
        """The model did not generate when asked for one token: the startup failed in its warm-up."""
        return cls(None, error, "warmup")

    @classmethod
    def of_node(cls, node: str) -> Failure:
        """A cluster's node failed with nothing in its log to say why."""
        return cls(None, "node failed", "unknown", node=node)


__all__ = ["SHOWN_MAX", "Failure", "Ready", "clip"]
