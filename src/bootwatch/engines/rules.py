"""Load engine rule files (TOML) and compile them.

A rule file names an engine and lists rules by kind. Every rule has a `pattern` (a regular expression
searched in the message, i.e. the line without its time/level/process prefix) and an `example`: a real log
line it must match, which the tests check against the real logs in the corpus and fixtures. Patterns are
RE2 (no look-arounds or back-references) and are matched with RE2 too, never with Python's `re`: a user's
pattern such as `(a+)+b` backtracks for minutes in `re`, and runs in linear time in RE2. All patterns
together also form the prefilter that lets bootwatch skip uninteresting lines at C speed.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import re2

from bootwatch.engines.capacity import CapacitySpec, ServingSpec, parse_capacity, parse_serving
from bootwatch.engines.pattern import Pattern
from bootwatch.errors import UsageError

# A rule file is a few KiB; a limit keeps `--rules /dev/zero` or a mistyped path to a big log from eating memory.
MAX_RULE_FILE = 1 << 20
# Per pattern: RE2's default is 8 MiB; a pattern needing more (`(a{100}){100}`) is refused, not run.
_OPTIONS = re2.Options()
_OPTIONS.max_mem = 32 << 20
_OPTIONS.log_errors = False  # its errors become our one-line message, not absl noise on stderr

KINDS = (
    "detect",
    "launch",
    "flag",
    "phase",
    "progress",
    "ready",
    "fatal",
    "suspect",
    "detail",
    "benign",
    "fact",
    "warning",
    "category",
    "stats",
)
FATAL_ROLES = ("cause", "death", "wrapper", "cause_before", "signal", "cause_next", "detail_next")
# Rule sets that engines extend; not engines themselves.
SHARED = ("python", "uvicorn", "ggml")


@dataclass(slots=True)
class Rule:
    kind: str
    regex: Pattern  # RE2, as checked: linear time whatever the pattern and the line
    source: str  # "file.toml#phase[3]", for messages and tests
    example: str | list[str] | None = None
    name: str | None = None  # phase name, fact name, warning kind, flag name, category
    role: str | None = None  # fatal: cause | death | wrapper | cause_before | signal | cause_next | detail_next
    category: str | None = None
    repeat: str | None = None  # phase: what a second occurrence from the same process means
    done: bool = False  # phase: this line ends the phase rather than starting it
    draft: bool = False  # phase: it is the draft model's (speculative decoding)
    unless: str | None = None  # ready: not when this flag is set ("a|b": any of these)
    needs: str | None = None  # ready: only once this flag is set (a line that means ready only after another)
    # ready: the line proves readiness came before it (an offline engine's first request): the launch was ready at
    # its last phase line before this one
    back: bool = False
    # ready: the server says here that it starts serving, but a line of its HTTP framework may still follow (and
    # be the readiness), or a bind error: ready at this line once a `proof` line, a quiet spell or the end of a
    # recorded log confirms it
    tentative: bool = False
    proof: bool = False  # ready: the line proves a `tentative` ready line before it (serving numbers), else ready here
    # ready: not readiness after an exception the launch raised before it (mlx_lm.server starts its HTTP server even
    # when the model it loads first raised): that exception is the startup's failure
    clean: bool = False
    traceback: bool = False  # benign: the line is logged with its exception; the traceback right below it is its
    first_only: bool = False  # launch: starts a launch only once per launch of its engine (a reload is not one)
    load: bool = False  # flag: the line begins a model load (after ready: the next ready line is that load's)
    # launch: a line each new process of the engine prints as it starts, no banner: after the launch was ready (and
    # its `needs` flag is set) it begins the next launch, of the same engine; never a launch otherwise
    restart: bool = False
    message: str | None = None  # warning: what to tell the user
    weight: int = 1  # detect: when several engines' signs are on one line, the heaviest wins
    levels: tuple[str, ...] = ()  # only lines at these levels ("-": a line with no level, printed bare)
    # stats: the numbers are read from the raw line with this pattern (TGI keeps them in the span, before the
    # message the pattern matches); None: from the pattern's own named groups
    fields: Pattern | None = None
    # stats: a refused or failed request's cause (a key such as "context_exceeded") and what fixes it; the fix
    # may name the launch's facts in braces ("raise -c (now {n_ctx_slot} tokens per slot)")
    cause: str | None = None
    fix: str | None = None

    def allowed(self, flags: set[str] | frozenset[str]) -> bool:
        """A ready or launch rule's flags: none of `unless` is set, and `needs` is."""
        if self.unless and any(u in flags for u in self.unless.split("|")):
            return False
        return not self.needs or self.needs in flags


@dataclass
class EngineRules:
    name: str
    rules: dict[str, list[Rule]] = field(default_factory=lambda: {k: [] for k in KINDS})
    processes: list[str] = field(default_factory=list)  # titles of child processes the server dies with
    runs: list[str] = field(default_factory=list)  # engines it starts as children (their banners are not launches)
    display: str = ""  # the name people know it by ("SGLang")
    formats: list[str] = field(default_factory=list)  # log prefix families only this engine prints (evidence)
    targets: list[str] = field(default_factory=list)  # Rust crates only it logs from (tracing targets: evidence)
    health: str = ""  # the path that answers 200 once it serves ("/health"), when the server has one
    capacity: list[CapacitySpec] = field(default_factory=list)  # asked versus effective (engines/capacity.py)
    serving: ServingSpec | None = None  # its concurrency flag and /metrics names (engines/capacity.py)
    commands: list[Pattern] = field(
        default_factory=list
    )  # command lines that start it (`run`): its engine until a line says
    executables: list[str] = field(default_factory=list)  # its programs' bare names ("vllm", "llama-server")
    # a shared file's wordings of a shell that cannot find a program, `{name}` where the program's name goes
    shell_not_found: list[str] = field(default_factory=list)

    def add(self, other: EngineRules) -> None:
        for k in KINDS:
            self.rules[k].extend(other.rules[k])
        self.capacity.extend(other.capacity)
        self.serving = self.serving or other.serving
        self.processes.extend(p for p in other.processes if p not in self.processes)

    def __getitem__(self, kind: str) -> list[Rule]:
        return self.rules[kind]

    def all(self) -> Iterator[Rule]:
        for k in KINDS:
            yield from self.rules[k]

    def index(self) -> dict[int, int]:
        """id(rule) -> its position within its kind: rules compete in file order."""
        return {id(r): i for k in KINDS for i, r in enumerate(self.rules[k])}


@dataclass
class RuleBook:
    """The compiled rules of every engine, each already merged with the shared files it extends.

    `matching(text)` runs every pattern of every engine at once (an RE2 set) and returns the rules whose
    pattern is found: the tracker then looks only at those, instead of trying each rule in turn.
    """

    engines: dict[str, EngineRules]
    detect: list[tuple[str, Rule]]  # (engine, rule) pairs over all engines
    launch: list[tuple[str, Rule]]
    positions: dict[str, dict[int, int]] = field(default_factory=dict)
    _set: object = None
    _set_match: Any = None
    _by_index: list[list[Rule]] = field(default_factory=list)

    def __post_init__(self) -> None:
        from bootwatch.engines.prefilter import for_union

        self.positions = {name: er.index() for name, er in self.engines.items()}
        set_options = re2.Options()
        set_options.max_mem = 256 << 20  # every pattern at once
        set_options.log_errors = False
        rset = re2.Set.SearchSet(set_options)
        where: dict[str, int] = {}
        for rule in self.all_rules():
            if rule.kind == "category":  # matched against a failure's text, never against lines
                continue
            pattern = for_union(rule.regex.pattern, anchors=True)  # a set captures nothing; names would clash
            if pattern not in where:
                try:
                    where[pattern] = rset.Add(pattern)
                except Exception as e:  # re2 raises a bare error type
                    raise UsageError(f"{rule.source}: pattern is not RE2-compatible ({e}): {pattern!r}") from None
                self._by_index.append([])
            self._by_index[where[pattern]].append(rule)
        rset.Compile()
        self._set = rset
        self._set_match = rset._set.Match  # the C++ set itself: the wrapper's method is a Python call more per line

    def matching(self, text: str) -> list[Rule]:
        hits = self._set_match(text.encode())
        if not hits:
            return []
        by_index = self._by_index
        return [r for i in hits for r in by_index[i]]

    @property
    def processes(self) -> tuple[str, ...]:
        return tuple(sorted({p for er in self.engines.values() for p in er.processes}))

    def engine_of_command(self, argv: list[str]) -> str | None:
        """The engine a command line starts, by the engines' `commands` patterns (`run` knows it before any line)."""
        line = " ".join(argv)
        for name, er in self.engines.items():
            if any(p.search(line) for p in er.commands):
                return name
        return None

    def for_engine(self, name: str) -> EngineRules:
        return self.engines.get(name) or self.engines["unknown"]

    def all_rules(self) -> Iterator[Rule]:
        seen: set[int] = set()
        for er in self.engines.values():
            for r in er.all():
                if id(r) not in seen:
                    seen.add(id(r))
                    yield r


def _reason(e: Exception) -> str:
    """RE2's error text comes as bytes in args[0]."""
    arg = e.args[0] if e.args else e
    return arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)


def compile_pattern(pattern: str, where: str) -> Pattern:
    """A rule's pattern, compiled by the engine that will match it."""
    try:
        return Pattern(re2.compile(pattern, _OPTIONS))
    except re2.error as e:
        raise UsageError(f"{where}: bad pattern {pattern!r} (RE2: {_reason(e)})") from None


_RULE_KEYS: dict[str, type | tuple[type, ...]] = {
    "pattern": str,
    "example": (str, list),
    "name": str,
    "role": str,
    "category": str,
    "repeat": str,
    "done": bool,
    "unless": str,
    "message": str,
    "weight": int,
    "levels": list,
    "note": str,
    "draft": bool,
    "needs": str,
    "first_only": bool,
    "load": bool,
    "restart": bool,
    "back": bool,
    "tentative": bool,
    "proof": bool,
    "clean": bool,
    "traceback": bool,
    "fields": str,
    "cause": str,
    "fix": str,
}
_TOP_KEYS = {
    "engine",
    "extends",
    "processes",
    "runs",
    "formats",
    "targets",
    "display",
    "health",
    "capacity",
    "serving",
    "commands",
    "executables",
    "shell_not_found",
    *KINDS,
}


def _strings(value: Any, where: str, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{where}: `{key}` must be an array of strings")
    return list(value)


def _check_types(e: dict[str, Any], where: str) -> None:
    unknown = set(e) - set(_RULE_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown keys {sorted(unknown)} (known: {', '.join(sorted(_RULE_KEYS))})")
    for key, value in e.items():
        want = _RULE_KEYS[key]
        # TOML booleans are ints to Python: `weight = true` is a mistake, not a weight of 1.
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            names = " or ".join(t.__name__ for t in (want if isinstance(want, tuple) else (want,)))
            raise UsageError(f"{where}: `{key}` must be a {names.replace('str', 'string').replace('list', 'array')}")
    for key in ("levels", "example"):
        if isinstance(e.get(key), list):
            _strings(e[key], where, key)


def parse_rule_file(text: str, origin: str) -> tuple[str, list[str], EngineRules]:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UsageError(f"{origin}: not valid TOML: {err}") from None
    name = doc.get("engine")
    if not isinstance(name, str) or not name:
        raise UsageError(f'{origin}: needs a top-level `engine = "name"`')
    unknown_top = set(doc) - _TOP_KEYS
    if unknown_top:
        raise UsageError(f"{origin}: unknown top-level keys {sorted(unknown_top)} (rule kinds are: {', '.join(KINDS)})")
    extends = _strings(doc.get("extends", []), origin, "extends")
    for key in ("display", "health"):
        if not isinstance(doc.get(key, ""), str):
            raise UsageError(f"{origin}: `{key}` must be a string")
    er = EngineRules(
        name,
        processes=_strings(doc.get("processes", []), origin, "processes"),
        runs=_strings(doc.get("runs", []), origin, "runs"),
        display=doc.get("display", ""),
        formats=_strings(doc.get("formats", []), origin, "formats"),
        targets=_strings(doc.get("targets", []), origin, "targets"),
        health=doc.get("health", ""),
        capacity=parse_capacity(doc.get("capacity", []), origin),
        serving=parse_serving(doc.get("serving"), origin),
        commands=[
            compile_pattern(c, f"{origin}#commands[{i}]")
            for i, c in enumerate(_strings(doc.get("commands", []), origin, "commands"))
        ],
        executables=_strings(doc.get("executables", []), origin, "executables"),
        shell_not_found=_strings(doc.get("shell_not_found", []), origin, "shell_not_found"),
    )
    for i, t in enumerate(er.shell_not_found):
        if "{name}" not in t:
            raise UsageError(f"{origin}#shell_not_found[{i}]: needs `{{name}}` where the program's name goes")
        compile_pattern(t.replace("{name}", "x"), f"{origin}#shell_not_found[{i}]")
    for kind in KINDS:
        entries = doc.get(kind, [])
        if not isinstance(entries, list):
            raise UsageError(f"{origin}: `{kind}` must be an array of tables ([[{kind}]])")
        for i, entry in enumerate(entries):
            where = f"{origin}#{kind}[{i}]"
            if not isinstance(entry, dict) or "pattern" not in entry:
                raise UsageError(f"{where}: needs a `pattern`")
            e: dict[str, Any] = entry
            _check_types(e, where)
            if not e["pattern"]:
                raise UsageError(f"{where}: the pattern is empty (it would match every line)")
            role = e.get("role")
            if kind == "fatal" and role not in FATAL_ROLES:
                raise UsageError(f"{where}: role must be one of {FATAL_ROLES}")
            if (
                kind in ("phase", "progress", "fact", "warning", "flag", "category")
                and not e.get("name")
                and kind != "fact"
            ):
                raise UsageError(f"{where}: needs a `name`")
            er.rules[kind].append(
                Rule(
                    kind=kind,
                    regex=compile_pattern(e["pattern"], where),
                    source=where,
                    example=e.get("example"),
                    name=e.get("name"),
                    role=role,
                    category=e.get("category"),
                    repeat=e.get("repeat"),
                    done=bool(e.get("done", False)),
                    draft=bool(e.get("draft", False)),
                    unless=e.get("unless"),
                    needs=e.get("needs"),
                    first_only=bool(e.get("first_only", False)),
                    load=bool(e.get("load", False)),
                    restart=bool(e.get("restart", False)),
                    back=bool(e.get("back", False)),
                    tentative=bool(e.get("tentative", False)),
                    proof=bool(e.get("proof", False)),
                    clean=bool(e.get("clean", False)),
                    traceback=bool(e.get("traceback", False)),
                    message=e.get("message"),
                    weight=int(e.get("weight", 1)),
                    levels=tuple(e.get("levels", ())),
                    fields=compile_pattern(e["fields"], where) if "fields" in e else None,
                    cause=e.get("cause"),
                    fix=e.get("fix"),
                )
            )
    return name, extends, er


def read_rule_file(path: Path) -> str:
    """A user's rule file: a regular file, at most MAX_RULE_FILE bytes, UTF-8."""
    try:
        with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK)) as f:
            # O_NONBLOCK: opening a FIFO must not wait for a writer before the check below refuses it.
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                what = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
                raise UsageError(f"rule file {path}: {what}")
            data = f.read(MAX_RULE_FILE + 1)
    except OSError as e:
        raise UsageError(f"cannot read rule file {path}: {e.strerror or e}") from None
    if len(data) > MAX_RULE_FILE:
        raise UsageError(f"rule file {path}: larger than {MAX_RULE_FILE >> 20} MiB; is it really a rule file?")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"rule file {path}: not UTF-8 text") from None


def load_rulebook(extra: list[Path] | None = None) -> RuleBook:
    """Built-in rules plus the user's files; a user file for an existing engine adds to its rules."""
    parsed: dict[str, tuple[list[str], EngineRules]] = {}
    for entry in sorted(resources.files("bootwatch.engines").joinpath("data").iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".toml"):
            continue
        name, ext, er = parse_rule_file(entry.read_text("utf-8"), entry.name)
        parsed[name] = (ext, er)
    for path in extra or []:
        name, ext, er = parse_rule_file(read_rule_file(Path(path)), str(path))
        if name in parsed:
            old_ext, old = parsed[name]
            # User rules go first so that they win where rules compete; what the user's file does not say of
            # the engine (its display name, health path, commands, formats) stays as the built-in file says.
            er.add(old)
            er.display = er.display or old.display
            er.health = er.health or old.health
            er.runs = er.runs or list(old.runs)
            er.formats = er.formats or list(old.formats)
            er.targets = er.targets or list(old.targets)
            er.executables = er.executables or list(old.executables)
            parsed[name] = (sorted(set(old_ext) | set(ext)), er)
        else:
            parsed[name] = (ext or ["python", "uvicorn"], er)
    engines: dict[str, EngineRules] = {}
    for name, (ext, er) in parsed.items():
        if name in SHARED:
            continue
        merged = EngineRules(
            name,
            runs=list(er.runs),
            display=er.display or name,
            health=er.health,
            formats=list(er.formats),
            targets=list(er.targets),
            commands=list(er.commands),
            executables=list(er.executables),
        )
        merged.add(er)
        for base in ext:
            if base not in parsed:
                raise UsageError(f"{name}: extends unknown rule set {base!r}")
            merged.add(parsed[base][1])
        engines[name] = merged
    wordings = [t for _, er in parsed.values() for t in er.shell_not_found]
    for er in engines.values():
        if er.executables and wordings:
            rule = _not_found_rule(er, wordings)
            er.rules["detect"].append(rule)
            # and the launch's failure, whatever else the wording says ("No such file or directory" is also what a
            # missing data file gets; of the engine's own program it is the shell that could not start it)
            er.rules["fatal"].append(
                dataclasses.replace(rule, kind="fatal", role="cause", category="environment", weight=1)
            )
    detect = [(n, r) for n, er in engines.items() for r in er["detect"] if n != "unknown"]
    launch = [(n, r) for n, er in engines.items() for r in er["launch"]]
    return RuleBook(engines, detect, launch)


def _not_found_rule(er: EngineRules, wordings: list[str]) -> Rule:
    """A shell that cannot find one of the engine's programs names the engine that was meant to start: the
    launch's only line is often that one (a venv not activated, a PATH without the install)."""
    names = "(?:" + "|".join(re.escape(x) for x in er.executables) + ")"
    where = f"{er.name}.toml#executables"
    pattern = "|".join(f"(?:{t.replace('{name}', names)})" for t in wordings)
    # bash's own words for the first program (tests/test_rule_examples.py runs every rule on its example)
    example = f"bash: line 1: {er.executables[0]}: command not found"
    return Rule(kind="detect", regex=compile_pattern(pattern, where), source=where, example=example, weight=3)
