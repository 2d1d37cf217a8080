"""An engine is one TOML file: its schema is published (src/bootwatch/engines/rules.schema.json) and every rule
file, built in or a user's, is checked against it; what the file says (display name, health path) is used."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from bootwatch.engines import load_rulebook
from bootwatch.engines.rules import _RULE_KEYS, _TOP_KEYS, KINDS
from bootwatch.probes.http import HttpProbe

SCHEMA = json.loads(resources.files("bootwatch.engines").joinpath("rules.schema.json").read_text("utf-8"))
DATA = sorted(p for p in resources.files("bootwatch.engines").joinpath("data").iterdir() if p.name.endswith(".toml"))


@pytest.mark.parametrize("entry", DATA, ids=lambda p: p.name)
def test_every_built_in_rule_file_follows_the_published_schema(entry) -> None:  # noqa: ANN001
    jsonschema.validate(tomllib.loads(entry.read_text("utf-8")), SCHEMA)


def test_schema_and_loader_know_the_same_keys() -> None:
    assert set(SCHEMA["properties"]) == _TOP_KEYS
    assert set(SCHEMA["$defs"]["rule"]["properties"]) == set(_RULE_KEYS)
    assert set(KINDS) <= set(SCHEMA["properties"])


def test_schema_rejects_what_the_loader_rejects() -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"engine": "x", "ready": [{"pattern": "a", "colour": "red"}]}, SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"engine": "x", "fatal": [{"pattern": "a", "role": "maybe"}]}, SCHEMA)


def test_engines_carry_their_display_name_and_health_path() -> None:
    book = load_rulebook()
    assert book.engines["sglang"].display == "SGLang" and book.engines["vllm"].health == "/health"
    assert book.engines["ollama"].health == "/"  # Ollama answers 404 on /health


def test_a_bare_url_asks_the_engines_own_health_path() -> None:
    probe = HttpProbe("http://127.0.0.1:11434")
    assert probe.url == "http://127.0.0.1:11434/health"
    probe.use_health_path("/")
    assert probe.url == "http://127.0.0.1:11434/"
    given = HttpProbe("http://127.0.0.1:8000/v1/models")
    given.use_health_path("/health")
    assert given.url == "http://127.0.0.1:8000/v1/models"  # a path the user gave is kept


def test_a_users_engine_can_be_forced_with_engine(tmp_path: Path) -> None:
    rules = tmp_path / "mine.toml"
    rules.write_text(
        'engine = "mine"\ndisplay = "My Server"\n[[ready]]\npattern = \'^all systems go$\'\n'
        'example = "all systems go"\n'
    )
    log = tmp_path / "s.log"
    log.write_text("booting\nall systems go\n")
    cmd = [sys.executable, "-m", "bootwatch", "report", "--json", "--rules", str(rules)]
    s = json.loads(
        subprocess.run(
            [*cmd, "--engine", "mine", str(log)], capture_output=True, text=True, timeout=60, check=True
        ).stdout
    )
    assert s["engine"] == "mine" and s["verdict"] == "ready" and s["engine_display"] == "My Server"
    bad = subprocess.run([*cmd, "--engine", "theirs", str(log)], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown engine 'theirs'" in bad.stderr and "mine" in bad.stderr


@pytest.mark.parametrize(
    "line, engine",
    [
        ("bash: line 1: trtllm-serve: command not found", "trtllm"),
        ("./start.sh: line 4: text-generation-launcher: command not found", "tgi"),
        ("dash: 1: vllm: not found", "vllm"),
        # a path to the program that is not there (bash 5.2 and dash 0.5.12, here)
        ("bash: /home/x/ollama/bin/ollama: No such file or directory", "ollama"),
        ("/tmp/s.sh: line 2: /home/x/ollama/bin/ollama: No such file or directory", "ollama"),
        ("dash: 1: /home/x/ollama/bin/ollama: not found", "ollama"),
        ("zsh:1: command not found: lmdeploy", "lmdeploy"),
        ("fish: Unknown command: ollama", "ollama"),
        ('exec: "llama-server": executable file not found in $PATH: unknown.', "llamacpp"),
        ("'ollama' is not recognized as an internal or external command,", "ollama"),
        (
            "vllm : The term 'vllm' is not recognized as the name of a cmdlet, function, script file, or operable program.",
            "vllm",
        ),
    ],
)
def test_a_shell_that_cannot_find_an_engines_program_names_the_engine(line: str, engine: str, tmp_path: Path) -> None:
    from bootwatch.pipeline import analyze_path

    log = tmp_path / "one.log"
    log.write_text(line + "\n")
    summary = analyze_path(log)
    assert summary["engine"] == engine
    assert summary["verdict"] == "failed" and summary["failure"]["category"] == "environment"


def test_a_program_that_is_not_an_engines_names_none(tmp_path: Path) -> None:
    from bootwatch.pipeline import analyze_path

    log = tmp_path / "one.log"
    log.write_text("bash: line 1: nvidia-smi-x: command not found\n")
    assert analyze_path(log)["engine"] == "unknown"
