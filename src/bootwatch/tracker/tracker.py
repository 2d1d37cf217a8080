"""Lines in, events out: launch segmentation, phases, facts, warnings, tracebacks and the verdict.

The tracker never does I/O and never looks at the wall clock itself: live callers pass the time in
(`settle`, `exited`), so recorded and live input run through exactly the same decisions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from bootwatch.engines.rules import Rule, RuleBook
from bootwatch.lines import Line
from bootwatch.serving import ServingTracker
from bootwatch.tracker import derived
from bootwatch.tracker.candidates import (
    Candidate,
    choose,
    failure_json,
    from_traceback,
    is_termination,
    same_failure_procs,
)
from bootwatch.tracker.events import (
    Event,
    FactEvent,
    FailedEvent,
    LaunchEvent,
    PhaseEvent,
    ProgressEvent,
    ProgressSoFarEvent,
    ReadyEvent,
    WarningEvent,
)
from bootwatch.tracker.launch import Launch
from bootwatch.tracker.phases import RANK, Phase
from bootwatch.tracker.summary import Summary
from bootwatch.tracker.tracebacks import EXC_LINE, TracebackAssembler, is_header
from bootwatch.tracker.verdict import LogSays, Verdict, log_verdict

_LAUNCH_WEIGHT = 3  # a launch banner names its engine
_DETECT_REPEAT = 3  # times one detect rule counts in a launch
_FMT_MAX = 2  # evidence a prefix family can give at most
_FMT_MAX_OF = {"slog": 6}  # a Go server's slog records with their source files are Ollama's through and through
_REVOKE_WEIGHT = 2  # evidence of a known engine that overrules readiness read with generic rules
_BARE_ASSERT = re.compile(r"^(?:\w+\.)*AssertionError:?\s*$")
_VALIDATION_SUMMARY = re.compile(r"ValidationError: \d+ validation errors? for ")
_ERROR_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL"})
_EVIDENCE_KINDS = frozenset({"fatal", "suspect", "detail"})
_ALIAS = {"load_draft": "load_weights"}
_PHASE_CATEGORY = {
    "download": "weights",
    "load_weights": "weights",
    "load_draft": "weights",
    "distributed_init": "distributed",
    "compile": "compile",
    "cuda_graph": "compile",
    "warmup": "warmup",
    "config": "config",
    "start": "config",
    "kv_cache": "oom",
}


def _value(raw: str) -> Any:
    s = raw.strip().strip("'\"")
    if s in ("None", "null", ""):
        return None
    if s in ("True", "False"):
        return s == "True"
    try:
        return int(s.replace(",", ""))
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s


class Tracker:
    def __init__(
        self, book: RuleBook, engine: str | None = None, grace_s: float = 1.5, quiet_fail_s: float = 5.0
    ) -> None:
        self.book = book
        self.forced = engine
        self.grace_s = grace_s
        self.quiet_fail_s = quiet_fail_s
        # Prefix families only one engine prints (its rule file's `formats`): evidence of that engine.
        self._fmt_engine = {f: name for name, er in book.engines.items() for f in er.formats}
        self.launch: Launch | None = None
        self.launches = 0
        self.tb = TracebackAssembler()
        self.exit_info: dict[str, Any] | None = None
        self.tail: tuple[int, str] | None = None  # the last non-blank line the reader saw (number, text)
        self._last_evidence_t: float | None = None
        self.serving = ServingTracker()

    # ---- input -------------------------------------------------------------------------------------
    @property
    def wants_all_lines(self) -> bool:
        return self.tb.busy

    def feed(self, line: Line) -> list[Event]:
        ev: list[Event] = []
        text = line.text
        hits = self.book.matching(text) if text else []
        launch = self._segment(line, hits, ev)
        if line.t is not None:
            launch.last_t = line.t
        t = launch.last_t
        launch.last_no = line.no

        if not launch.forced_engine:
            self._detect(launch, line, hits)
        if is_header(text):
            self.tb.start(line)
        elif self.tb.busy:
            consumed, done = self.tb.feed(line)
            if done is not None:
                self._add_candidate(launch, from_traceback(done), ev)
            if consumed:
                return ev
        sel = self._select(launch, hits)

        benign = bool(sel.get("benign"))
        for r in sel.get("flag", ()):
            launch.flags.add(r.name or "")
        # Facts come from argument dumps too: a benign line is no evidence, but it still has facts.
        matched = self._facts(launch, sel.get("fact", ()), line, ev)
        matched |= self._warnings(launch, sel.get("warning", ()), line, t, ev)
        if launch.ready is None:
            matched |= self._phases(launch, sel.get("phase", ()), line, t, ev)
            matched |= self._progress(launch, sel.get("progress", ()), line, t, ev)
            matched |= self._ready(launch, sel.get("ready", ()), line, t, ev)
        elif "stats" in sel:
            ev += self.serving.feed_line(launch, line, sel["stats"])  # after ready: throughput, queue, findings
        if not benign:
            matched |= self._evidence(launch, sel, line, t, ev)
        if any(r.kind in _EVIDENCE_KINDS for r in hits):
            launch.evidence_lines.append((line, hits))
        if matched or line.level in ("WARNING", "ERROR"):
            launch.last_line = line.raw
        launch.recent.append(line.raw)
        return ev

    def _select(self, launch: Launch, hits: list[Rule]) -> dict[str, list[Rule]]:
        """The matched rules that belong to this launch's engine, by kind, in the order of its files."""
        pos = self.book.positions.get(launch.engine) or self.book.positions["unknown"]
        kinds: dict[str, list[tuple[int, Rule]]] = {}
        for r in hits:
            p = pos.get(id(r))
            if p is not None:
                kinds.setdefault(r.kind, []).append((p, r))
        return {k: [r for _, r in sorted(v, key=lambda x: x[0])] for k, v in kinds.items()}

    def _segment(self, line: Line, hits: list[Rule], ev: list[Event]) -> Launch:
        """The launch this line belongs to: a launch line (a banner) may begin a new one."""
        hit_ids = {id(r) for r in hits if r.kind == "launch"}
        for engine, rule in self.book.launch if hit_ids else ():
            if id(rule) in hit_ids:
                launch = self._launch_line(line, self.forced or engine, rule, ev)
                if launch is not None:
                    return launch
        if self.launch is None:
            self._new_launch(line, self.forced or "unknown", ev)
        assert self.launch is not None
        return self.launch

    def _launch_line(self, line: Line, engine: str, rule: Rule, ev: list[Event]) -> Launch | None:
        """A launch line: the launch it begins or belongs to, or None when it is no launch line here."""
        cur = self.launch
        if cur is not None and rule.first_only and cur.first_only_seen:
            return None  # a model reloaded by a server that is already up is serving, not a new startup
        if cur is not None and self._child_banner(cur, engine):
            cur.scores[engine] = cur.scores.get(engine, 0) + 1
            return None
        if cur is None or cur.progressed or rule.source in cur.markers:
            first_only_seen = cur is not None and rule.first_only and cur.first_only_seen
            cur = self._new_launch(line, engine, ev)
            cur.first_only_seen = first_only_seen
            cur.engine_by_banner = not self.forced
        elif cur.engine == "unknown" and not cur.forced_engine:
            cur.engine, cur.rules = engine, self.book.for_engine(engine)
        cur.first_only_seen |= rule.first_only
        cur.scores[engine] = cur.scores.get(engine, 0) + _LAUNCH_WEIGHT
        cur.markers.add(rule.source)
        return cur

    def _child_banner(self, cur: Launch, engine: str) -> bool:
        """The banner of an engine this one runs as a child (Ollama relaying llama-server) while it is still
        starting: part of this launch."""
        return (
            not self.forced
            and cur.ready is None
            and cur.failure is None
            and engine in self.book.for_engine(cur.engine).runs
        )

    def _new_launch(self, line: Line, engine: str, ev: list[Event]) -> Launch:
        self.tb.flush()
        self.launches += 1
        self._last_evidence_t = None
        launch = Launch(engine, self.book.for_engine(engine), line.no, line.t, forced_engine=bool(self.forced))
        launch.phases.append(Phase("start", line.no, line.t))
        self.launch = launch
        if self.launches > 1:
            ev.append(LaunchEvent(t=line.t, line_no=line.no, launch=self.launches))
        return launch

    def _detect(self, launch: Launch, line: Line, hits: list[Rule]) -> None:
        """Weigh the evidence of every line (banners, argument dumps, prefixes, module paths in tracebacks):
        the engine with the most evidence so far wins, and may still change until the launch is ready."""
        self._weigh_prefix(launch, line)
        if hits:
            self._weigh_detect_rules(launch, hits)
        if launch.engine_by_banner:
            return  # the launch began with this engine's own banner: other engines' lines are its children's
        scores = launch.scores
        best, weight = launch.engine, scores.get(launch.engine, 0)
        for engine in self.book.engines:
            if scores.get(engine, 0) > weight:
                best, weight = engine, scores[engine]
        if best == launch.engine:
            return
        if launch.ready is not None:
            if launch.ready_engine != "unknown" or weight < _REVOKE_WEIGHT:
                return
            self._revoke_ready(launch)
        launch.engine, launch.rules = best, self.book.for_engine(best)
        self._rejudge(launch, line)

    def _weigh_prefix(self, launch: Launch, line: Line) -> None:
        """A prefix only one engine prints counts, but a flood of prefixed lines never outweighs banners."""
        fmt = line.fmt or ""
        engine = self._fmt_engine.get(fmt)
        if engine is None:
            return
        key = "format " + fmt
        seen = launch.detect_hits.get(key, 0)
        if seen < _FMT_MAX_OF.get(fmt, _FMT_MAX):
            launch.detect_hits[key] = seen + 1
            launch.scores[engine] = launch.scores.get(engine, 0) + 1

    def _weigh_detect_rules(self, launch: Launch, hits: list[Rule]) -> None:
        hit_ids = {id(r) for r in hits if r.kind == "detect"}
        if not hit_ids:
            return
        for engine, rule in self.book.detect:
            if id(rule) not in hit_ids:
                continue
            # One kind of line counts a few times at most: a long dump of one library's lines (ggml's
            # print_info) must not outweigh a few lines only one program prints.
            seen = launch.detect_hits.get(rule.source, 0)
            if seen < _DETECT_REPEAT:
                launch.detect_hits[rule.source] = seen + 1
                launch.scores[engine] = launch.scores.get(engine, 0) + rule.weight

    @staticmethod
    def _revoke_ready(launch: Launch) -> None:
        """Readiness came from a generic uvicorn line, but this is a known engine whose readiness means more
        (SGLang warms up after uvicorn starts): that line was not readiness."""
        launch.ready = None
        launch.ready_engine = None
        if launch.phases and launch.phases[-1].name == "ready":
            launch.phases.pop()
            if launch.phases:
                launch.phases[-1].end_line = launch.phases[-1].end_t = None

    def _rejudge(self, launch: Launch, current: Line) -> None:
        """Lines read under the engine it seemed to be: what the real engine's rules call evidence counts."""
        if launch.ready is not None:
            return
        known = {c.line_no for c in launch.candidates}
        ev: list[Event] = []  # nothing is decided here: a verdict comes from the usual places
        for line, hits in launch.evidence_lines:
            if line is current or line.no in known:
                continue
            sel = self._select(launch, hits)
            if not sel.get("benign"):
                self._evidence(launch, sel, line, line.t, ev)

    # ---- rule kinds --------------------------------------------------------------------------------
    def _facts(self, launch: Launch, rules: Iterable[Rule], line: Line, ev: list[Event]) -> bool:
        hit = False
        for r in rules:
            m = r.regex.search(line.text)
            if not m:
                continue
            hit = True
            groups = {k: v for k, v in m.groupdict().items() if v is not None}
            if r.name and "value" in groups:
                groups = {r.name: groups.pop("value"), **groups}
            for name, raw in groups.items():
                val = _value(raw)
                if val is None:
                    continue
                if launch.facts.get(name) != val:
                    launch.facts[name] = val
                    launch.fact_lines[name] = line.no
                    ev.append(FactEvent(t=line.t, name=name, value=val, line_no=line.no))
        if hit:
            for w in derived.check(launch):
                self._warn(launch, w["kind"], w["line_no"], w["text"], line.t, ev)
        return hit

    def _warn(self, launch: Launch, kind: str, no: int, text: str, t: float | None, ev: list[Event]) -> None:
        if kind in launch.warned:
            return
        launch.warned.add(kind)
        w = {"line_no": no, "kind": kind, "text": text}
        launch.warnings.append(w)
        ev.append(WarningEvent.of(t, w))

    def _warnings(self, launch: Launch, rules: Iterable[Rule], line: Line, t: float | None, ev: list[Event]) -> bool:
        for r in rules:  # rules come from the RE2 set's hits: they matched this message already
            text = r.message.format(line=line.text) if r.message else line.text
            self._warn(launch, r.name or "warning", line.no, text, t, ev)
            return True
        return False

    def _begin(self, launch: Launch, name: str, draft: bool, line: Line, t: float | None, ev: list[Event]) -> None:
        launch.close_phase(line.no, t)
        launch.phases.append(Phase(name, line.no, t, draft=draft))
        self._cancel_candidates(launch, line.proc)
        ev.append(PhaseEvent(t=t, name=name, line_no=line.no, draft=draft, text=line.text))

    def _phases(self, launch: Launch, rules: Iterable[Rule], line: Line, t: float | None, ev: list[Event]) -> bool:
        for r in rules:  # from the set's hits: they matched already
            name = r.name or ""
            cur = launch.current
            if r.done:
                same = cur is not None and _ALIAS.get(cur.name, cur.name) == _ALIAS.get(name, name)
                if not same and (cur is None or RANK.get(name, 0) > RANK.get(cur.name, 0)):
                    # An end line with no begin line (older versions print only the end): it did happen.
                    self._begin(launch, name, r.draft, line, t, ev)
                    cur, same = launch.current, True
                if same and cur is not None:
                    cur.done = True
                    ev.append(ProgressEvent(t=t, phase=cur.name, progress=1.0, line_no=line.no))
                self._cancel_candidates(launch, line.proc)
                return True
            key = (line.proc, r.source)
            seen = launch.begun.get(key, 0)
            launch.begun[key] = seen + 1
            draft = r.draft
            if seen and r.repeat:
                name, draft = r.repeat, True
            if cur is not None and cur.name == name and cur.draft == draft:
                return True
            if cur is None or draft or RANK.get(name, 0) > RANK.get(cur.name, 0):
                self._begin(launch, name, draft, line, t, ev)
            return True
        return False

    def _progress(self, launch: Launch, rules: Iterable[Rule], line: Line, t: float | None, ev: list[Event]) -> bool:
        for r in rules:
            m = r.regex.search(line.text)
            if not m:
                continue
            name = r.name or ""
            cur = launch.current
            if cur is None:
                return True
            if _ALIAS.get(cur.name, cur.name) != name and RANK.get(name, 0) > RANK.get(cur.name, 0):
                self._begin(launch, name, False, line, t, ev)
                cur = launch.current
            elif _ALIAS.get(cur.name, cur.name) != name:
                return True
            g = m.groupdict()
            n_text, total_text = g.get("n"), g.get("total")
            if n_text is None or total_text is None:
                return True
            try:
                n, total = int(n_text), int(total_text)
            except ValueError:
                return True
            if cur is None:
                return True
            if (n, total) != (cur.n, cur.total):
                cur.n, cur.total = n, total
                ev.append(ProgressEvent(t=t, phase=cur.name, n=n, total=total, progress=cur.progress, line_no=line.no))
            self._cancel_candidates(launch, line.proc)
            return True
        return False

    def _ready(self, launch: Launch, rules: Iterable[Rule], line: Line, t: float | None, ev: list[Event]) -> bool:
        for r in rules:
            if r.unless and r.unless in launch.flags or r.needs and r.needs not in launch.flags:
                continue
            # From the set's hits: it matched this message already.
            if launch.dying is not None:
                return True  # a ready line after the server started dying is not readiness
            launch.close_phase(line.no, t)
            launch.phases.append(Phase("ready", line.no, t, line.no, t, done=True))
            ready_text = line.text.strip()
            launch.ready = {"line_no": line.no, "text": ready_text}
            launch.ready_engine = launch.engine
            self._cancel_candidates(launch, None, everything=True)
            ev.append(PhaseEvent(t=t, name="ready", line_no=line.no, draft=False, text=line.text))
            ev.append(ReadyEvent(t=t, line_no=line.no, text=ready_text))
            return True
        return False

    def _evidence(
        self, launch: Launch, sel: dict[str, list[Rule]], line: Line, t: float | None, ev: list[Event]
    ) -> bool:
        """Failure evidence on this line: a fatal rule's, else (before readiness) a suspect or detail rule's,
        else what the line is by its shape or level (an exception line, a FATAL or ERROR record)."""
        for r in sel.get("fatal", ()):
            if not r.levels or line.level in r.levels:
                self._fatal(launch, r, line, t, ev)
                return True
        if launch.ready is not None:
            return False
        for kind in ("suspect", "detail"):
            for r in sel.get(kind, ()):  # from the set's hits: matched already
                launch.candidates.append(self._candidate(launch, line, kind, r.category))
                return True
        return self._by_shape(launch, line, t, ev)

    def _candidate(
        self, launch: Launch, line: Line, kind: str, category: str | None = None, wrapper: bool = False
    ) -> Candidate:
        c = Candidate(
            line.no,
            line.text.strip(),
            line.proc,
            kind,
            line.no,
            category,
            list(launch.recent) + [line.raw],
            wrapper=wrapper,
        )
        c.level = line.level
        return c

    def _fatal(self, launch: Launch, r: Rule, line: Line, t: float | None, ev: list[Event]) -> None:
        if r.role in ("cause", "cause_before"):
            # cause_before: the line says the server gives up; an earlier line says why. If none does, this
            # line is still the best there is (a death candidate, chosen last).
            kind = "fatal" if r.role == "cause" else "death"
            self._add_candidate(launch, self._candidate(launch, line, kind, r.category), ev)
        elif r.role == "death":
            self._add_candidate(launch, self._candidate(launch, line, "death", r.category, wrapper=True), ev)
        self._mark_dying(launch, line, t)

    def _by_shape(self, launch: Launch, line: Line, t: float | None, ev: list[Event]) -> bool:
        text = line.text.strip()
        if EXC_LINE.match(text) and ":" in text and not text[:1].isspace() and _looks_exception(text):
            self._add_candidate(launch, self._candidate(launch, line, "loose"), ev)
            return True
        if line.level == "FATAL" and text:
            # Logged at FATAL level (TurboMind's [TM][FATAL], glog's F-lines): the program aborts after it.
            self._add_candidate(launch, self._candidate(launch, line, "fatal"), ev)
            self._mark_dying(launch, line, t)
            return True
        if line.level in _ERROR_LEVELS and text and not any(r.regex.search(text) for r in launch.rules["benign"]):
            # An error the server logged that no rule knows: not evidence of death by itself, but the best
            # explanation of one that follows closely.
            launch.error_lines.append(self._candidate(launch, line, "errlevel"))
        return False

    # ---- evidence and verdict ----------------------------------------------------------------------
    def _add_candidate(self, launch: Launch, c: Candidate, ev: list[Event]) -> None:
        rules = launch.rules
        if c.kind in ("traceback", "loose"):
            if any(r.regex.search(c.text) for r in rules["benign"]):
                return
            for r in rules["fatal"]:
                if r.role in ("wrapper", "death") and r.regex.search(c.text):
                    # An exception that only reports another process's failure: death, not its cause.
                    c.wrapper = True
                    self._mark_dying(launch, Line(c.line_no, c.text, c.text), launch.last_t)
                    break
        c.runtime = launch.ready is not None
        if c.category is None:
            c.category = self._category(launch, c.text)
        launch.candidates.append(c)

    def _category(self, launch: Launch, text: str) -> str | None:
        for r in launch.rules["category"]:
            if r.regex.search(text):
                return r.name
        return None

    def _cancel_candidates(self, launch: Launch, proc: str | None, everything: bool = False) -> None:
        """Progress after a traceback from the same process means the process survived it."""
        if launch.dying is not None:
            return
        for c in launch.candidates:
            if not c.runtime and c.kind in ("traceback", "loose") and (everything or c.proc == proc):
                c.cancelled = True

    def _mark_dying(self, launch: Launch, line: Line, t: float | None) -> None:
        if launch.ready is not None:
            if launch.dying_after_ready is None:
                launch.dying_after_ready = line.no
        elif launch.dying is None:
            launch.dying = line.no
        self._last_evidence_t = t

    def _settle_chain(self, launch: Launch, c: Candidate) -> None:
        """A chained traceback names its cause in its last exception (the error the library chose to
        raise, e.g. "OSError: ... is not a valid JSON file" over the JSONDecodeError it caught), unless that
        one only wraps or terminates: then the latest one that does not."""
        tb = c.tb
        if tb is None or not tb.exceptions:
            return
        wrappers = [r for r in launch.rules["fatal"] if r.role in ("wrapper", "death")]
        pick = tb.exceptions[0]
        for no, text in reversed(tb.exceptions):
            if not is_termination(text) and not any(r.regex.search(text) for r in wrappers):
                pick = (no, text)
                break
        c.line_no, c.text = pick
        detail = tb.details.get(pick[0])
        c.detail = detail[1] if detail else None
        if detail is not None and (_VALIDATION_SUMMARY.search(c.text) or c.text.endswith(":")):
            # pydantic's exception line only counts the errors, and a message cut at its colon continues below:
            # the line below says what is wrong.
            c.line_no, c.text, c.detail = detail[0], detail[1], c.text
        elif tb.last_assert is not None and _BARE_ASSERT.match(c.text) and tb.last_assert[0] < c.line_no:
            # A bare AssertionError says nothing; the assertion that failed, quoted in the last frame, does.
            c.line_no, c.text, c.detail = tb.last_assert[0], tb.last_assert[1].strip(), c.text
        c.chain = [t for _, t in tb.exceptions]
        c.wrapper = any(r.regex.search(c.text) for r in wrappers)

    def _decide(self, launch: Launch, ev: list[Event], reason: str | None = None) -> None:
        runtime = launch.ready is not None
        for c in launch.candidates:
            if c.tb is not None:
                self._settle_chain(launch, c)
        if runtime and launch.runtime_failure is not None or not runtime and launch.failure is not None:
            return
        cands = [c for c in (*launch.candidates, *launch.error_lines) if c.runtime == runtime]
        chosen = choose(cands)
        if chosen is None:
            if reason is None:
                return
            chosen = self._unexplained(launch, reason)
        if chosen.category is None or chosen.category == "unknown":
            cat = self._category(launch, chosen.text)
            if cat is None and not runtime and launch.current is not None:
                cat = _PHASE_CATEGORY.get(launch.current.name)
            chosen.category = cat or "unknown"
        f = failure_json(chosen, same_failure_procs(chosen, cands))
        if runtime:
            launch.runtime_failure = f
        else:
            launch.failure = f
            launch.close_phase(launch.last_no, launch.last_t)
        ev.append(FailedEvent(t=launch.last_t, **f, runtime=runtime))

    def settle(self, now: float, server_alive: bool | None = None) -> list[Event]:
        """Live: a death seen in the log becomes a verdict once the log has been quiet for a moment, so that
        the traceback that explains it has been printed. Weaker evidence (a traceback, an exception logged as an
        error, with no death line after it) becomes one after a longer quiet, and only when nothing says the
        server still runs: what `finish` would call a failure if the log ended there."""
        ev: list[Event] = []
        launch = self.launch
        if launch is None:
            return ev
        quiet = now - max(self._last_evidence_t or 0.0, launch.last_t or 0.0)
        pending = launch.dying if launch.ready is None else launch.dying_after_ready
        if pending is not None and self._last_evidence_t is not None and quiet >= self.grace_s:
            self.tb.flush()
            self._decide(launch, ev)
        elif (
            launch.ready is None
            and launch.failure is None
            and server_alive is not True
            and quiet >= self.quiet_fail_s
            and self._ends_failed(launch, flush=False)
        ):
            self.tb.flush()
            if self._ends_failed(launch, flush=True):
                self._decide(launch, ev)
        return ev

    def _ends_failed(self, launch: Launch, flush: bool) -> bool:
        """Would the log, ended here, be a failed startup? (Open tracebacks count only once flushed.)"""
        return (
            launch.dying is not None
            or any(
                not c.cancelled
                and (c.kind in ("traceback", "fatal") or c.kind == "loose" and self._last_words(launch, c))
                for c in launch.candidates
            )
            or (not flush and self.tb.busy)
        )

    @staticmethod
    def _last_words(launch: Launch, c: Candidate) -> bool:
        """An exception the server logged as an error, or printed as nearly its last line, with nothing after
        it from the same process: what it died of, in a log that ends there."""
        if c.wrapper or c.termination:
            return False
        return c.level in _ERROR_LEVELS or c.line_no >= launch.last_no - 2

    def _unexplained(self, launch: Launch, reason: str) -> Candidate:
        """A death no rule explains: the last thing the server printed, when it reads like an error (a usage
        message, a missing module), is the best explanation there is; otherwise how the process ended."""
        if self.tail is not None:
            no, text = self.tail
            if no >= launch.start_line and _ERRORISH.search(text):
                c = Candidate(no, text, None, "death", no, None, list(launch.recent))
                c.detail = reason
                return c
        return Candidate(launch.last_no, reason, None, "death", launch.last_no, "killed", list(launch.recent))

    def exited(self, code: int | None, signal: int | None, reason: str | None = None) -> list[Event]:
        """The server (or a child that matters) is gone: whatever the log says, it died."""
        ev: list[Event] = []
        launch = self.launch
        if launch is None:
            # It died before printing anything a rule looks at (or anything at all): still a launch that failed.
            no, text = self.tail or (0, "")
            launch = self._new_launch(Line(no, text, text), self.forced or "unknown", ev)
            launch.last_no = no
        self.exit_info = {"code": code, "signal": signal}
        if reason is None:
            if signal == 9 or code in (137, -9):
                reason = "process killed (SIGKILL) with no traceback - likely the OOM killer"
            elif signal:
                reason = f"process terminated by signal {signal}"
            else:
                reason = f"process exited with code {code}"
        self.tb.flush()
        self._mark_dying(launch, Line(launch.last_no, reason, reason), launch.last_t)
        self._decide(launch, ev, reason=reason)
        return ev

    def finish(self) -> list[Event]:
        """End of a recorded log: pending tracebacks count; a log that just stops is incomplete."""
        ev: list[Event] = []
        launch = self.launch
        if launch is None:
            return ev
        self.tb.flush()
        if launch.ready is None:
            if self._ends_failed(launch, flush=True):
                self._decide(launch, ev)
        elif launch.dying_after_ready is not None:
            self._decide(launch, ev)
        cur = launch.current
        if cur is not None and cur.end_line is None and launch.failure is None and cur.name != "ready":
            cur.end_line, cur.end_t = launch.last_no, launch.last_t
        return ev

    # ---- output ------------------------------------------------------------------------------------
    def snapshot(self) -> list[Event]:
        """The current launch so far, as a few events: its phases, where the last one stands, facts and
        warnings (for a watcher that arrives while the server is already starting)."""
        launch = self.launch
        if launch is None:
            return []
        ev: list[Event] = []
        for p in launch.phases:
            if p.name != "start":
                ev.append(PhaseEvent(t=p.start_t, name=p.name, line_no=p.start_line, draft=p.draft, text=""))
        cur = launch.current
        if cur is not None and cur.progress is not None:
            ev.append(
                ProgressSoFarEvent(
                    t=launch.last_t,
                    phase=cur.name,
                    n=cur.n,
                    total=cur.total,
                    progress=cur.progress,
                    line_no=launch.last_no,
                )
            )
        for name, value in launch.facts.items():
            ev.append(FactEvent(t=launch.last_t, name=name, value=value, line_no=launch.fact_lines.get(name)))
        ev += [WarningEvent.of(launch.last_t, w) for w in launch.warnings]
        return ev

    def says(self, t: float) -> LogSays:
        """What the log says of the current launch, for the verdict machine."""
        launch = self.launch
        if launch is None:
            return LogSays(t, ready=False, failed=False, dying=False, runtime_failed=False, phase="start")
        cur = launch.current
        return LogSays(
            t,
            ready=launch.ready is not None,
            failed=launch.failure is not None,
            dying=launch.dying is not None and launch.ready is None,
            runtime_failed=launch.runtime_failure is not None,
            phase=cur.name if cur is not None else "start",
            last_line=launch.last_line or (launch.recent[-1] if launch.recent else ""),
        )

    def verdict(self) -> Verdict:
        """The verdict on the log read so far, as if it ended here (report, and a watch's catch-up)."""
        return log_verdict(self.says(self.launch.last_t or 0.0 if self.launch else 0.0))

    def summary(self, verdict: Verdict | None = None) -> Summary:
        launch = self.launch
        verdict = verdict or self.verdict()
        if launch is None:
            return Summary(
                verdict,
                self.forced or "unknown",
                None,
                None,
                None,
                [],
                {},
                [],
                extra={"launches": 0, "exit": self.exit_info},
            )
        return Summary(
            verdict=verdict,
            engine=launch.engine,
            engine_version=_str_or_none(launch.facts.get("engine_version")),
            ready=launch.ready,
            failure=launch.failure,
            phases=[p.to_json() for p in launch.phases],
            facts=dict(launch.facts),
            warnings=list(launch.warnings),
            runtime_failure=launch.runtime_failure,
            extra={
                "engine_display": self.book.for_engine(launch.engine).display or launch.engine,
                "engine_evidence": dict(launch.scores),
                "launches": self.launches,
                "exit": self.exit_info,
                "launch_start_line": launch.start_line,
                "last_line_no": launch.last_no,
                "serving": self.serving.summary(),
            },
        )


def _str_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


# What the last words of a process that died unexplained look like when they explain it.
_ERRORISH = re.compile(
    r"(?i)\b(?:error|exception|fatal|failed|failure|not found|no such|denied|invalid|"
    r"unrecognized|cannot|can't|unable|abort|panic)\b"
)


def _looks_exception(text: str) -> bool:
    head = text.split(":", 1)[0]
    return head.endswith(("Error", "Exception", "Interrupt", "Exit", "Fault")) or head in (
        "KeyboardInterrupt",
        "SystemExit",
    )


__all__ = ["Tracker", "Rule"]
