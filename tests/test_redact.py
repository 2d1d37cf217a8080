"""redact: every secret in the corpus of lines is masked, the rest of the line stays readable."""

from __future__ import annotations

import time

import pytest

from bootwatch.text.redact import redact, redact_obj

from .conftest import FIXTURES

MARK = "S3CR3T"  # every fake secret in tests/fixtures/secrets.txt holds it


def secret_lines() -> list[tuple[str, str]]:
    """(line, its redacted form) pairs from the fixture: a line, then `=> ` and the expected form."""
    rows = [r for r in (FIXTURES / "secrets.txt").read_text("utf-8").splitlines() if r and not r.startswith("#")]
    pairs = list(zip(rows[::2], rows[1::2], strict=True))
    assert all(want.startswith("=> ") for _, want in pairs), "each line must be followed by `=> expected`"
    return [(line, want[3:]) for line, want in pairs]


SECRETS = secret_lines()


@pytest.mark.parametrize(("line", "want"), SECRETS, ids=[f"line{i}" for i in range(len(SECRETS))])
def test_each_secret_is_masked_and_the_rest_kept(line: str, want: str) -> None:
    assert MARK in line and MARK not in want  # the fixture itself says what a secret is
    assert redact(line) == want
    assert redact(want) == want  # redacting twice changes nothing


def test_the_corpus_covers_every_kind_of_secret() -> None:
    text = "\n".join(line for line, _ in SECRETS)
    for needle in (
        "--api-key ",
        "--api-key=",
        "--token ",
        "--hf-token ",
        "--password ",
        "--secret=",
        "-key ",
        "hf_",
        "sk-",
        "sk-ant-",
        "Bearer ",
        "Authorization:",
        "AWS_SECRET_ACCESS_KEY=",
        "_TOKEN=",
        "_KEY=",
        "://user:",
        "api_key': '",
        "api_key='",
    ):
        assert needle in text, needle


@pytest.mark.parametrize(
    "line",
    [
        "INFO 04-27 15:04:49 [scheduler.py:228] Chunked prefill is enabled with max_num_batched_tokens=8192.",
        "python -m vllm serve m --max-num-batched-tokens 8192 --max-tokens 16 --tokenizer t --port 8000",
        "Using tokenizer config: eos_token='</s>', pad_token='<pad>', bos_token_id=1",
        "pip install hf_transfer; from huggingface_hub import hf_hub_download",
        "Downloading https://huggingface.co/m/resolve/main/model.safetensors",
        "server_args=ServerArgs(api_key=None, hf_token=None, max_total_tokens=None)",
        "task-0123456789 finished; disk-0123456789 mounted; KV cache keys: 1024",
        "--api-key --port 8000",  # a flag with no value: the next flag is not its value
    ],
)
def test_lines_without_secrets_are_left_alone(line: str) -> None:
    assert redact(line) == line


def test_json_values_are_redacted_deeply_and_keys_kept() -> None:
    obj = {"text": f"--api-key {MARK}1", "n": 3, "ctx": [f"hf_{MARK}abcdefgh12", None], "ok": True}
    out = redact_obj(obj)
    assert MARK not in repr(out)
    assert out["n"] == 3 and out["ok"] is True and out["ctx"][1] is None and out["text"] == "--api-key ***"


@pytest.mark.parametrize("line", ["a-" * 64000, "'api_key': [" * 10000, '--api-key "' * 10000, "a:b@" * 32000])
def test_long_hostile_lines_take_linear_time(line: str) -> None:
    # A log line can be 128 KiB; a pattern that backtracks quadratically would take seconds (minutes at
    # worst). The bound is loose on purpose: a loaded CI machine, not a benchmark.
    t = time.perf_counter()
    redact(line)
    assert time.perf_counter() - t < 2.0


def test_a_flag_and_an_assignment_on_one_line_are_both_masked() -> None:
    # The re-check harness found it: the multi-key flag's words stopped at the TGI form's quote and left its value.
    line = 'RuntimeError: startup failed with --api_key K and api_key: Some("TgiS3cretKeyVal")'
    out = redact(line)
    assert "TgiS3cretKeyVal" not in out and " K " not in out, out
