"""Mask secrets in text bootwatch prints or stores, keeping the rest of the line readable.

Server command lines and logs carry API keys (`--api-key sk-…`, `api_key='…'` in an args dump),
Hugging Face tokens (in 401 errors) and URL credentials. Every sink and the history store pass
what they show or keep through `redact`, so a secret never leaves bootwatch. The mask is `***`;
what names the secret (the flag, the variable, `hf_`, `Bearer`) stays, so the line still says
what was there. Redacting twice gives the same text.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***"

# Names that hold secrets. A bare "token" is only a secret as a whole name or with an
# auth-like prefix: tokenizer dumps are full of eos_token='</s>', which is no secret.
_NAME = (
    r"(?:[A-Za-z0-9_.-]*?(?:api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|"
    r"secret|password|passwd|credentials?|"
    r"(?:hf|hub|hugging[_-]?face(?:[_-]hub)?|auth|access|api|bearer|refresh|session|github|gh|gitlab|wandb|"
    r"openai|anthropic|ngc|slack)[_-]?token)"
    r"|(?-i:[A-Z0-9_]*_KEY|[A-Z0-9_]*_TOKEN)|token)"
)

# --api-key X, --api-key=X, --hf-token X, --password X, --openai-key X ... An API-key flag may take
# several keys (vLLM's --api-key K1 K2, lmdeploy's --api-keys): every word up to the next flag.
_VALUE = r"(?:\"[^\"]{0,1024}\"|'[^']{0,1024}'|[^\s\"']+)"  # bounded: a stray quote must not cost O(n²)
_FLAG = re.compile(
    r"(?<![\w-])(--?(?:[A-Za-z0-9]+[-_])*?(?:(api[-_]?keys?|keys)|key|token|password|passwd|secret|credential)"
    r"(?:=|\s+))"
    r"(?!--?[A-Za-z])(" + _VALUE + r"(?:\s+(?!-)" + _VALUE + r")*)"
)

# api_key='x', "api_key": "x", HF_TOKEN=x, password: x (an args dump, an env assignment, a config line)
_ASSIGN = re.compile(
    r"(?<![\w.-])(['\"]?" + _NAME + r"['\"]?\s*(?:=|:\s*)\s*)"
    r"(Some\(\"[^\"]{0,1024}\"\)|\"[^\"]{0,1024}\"|'[^']{0,1024}'|\[[^\]]{0,1024}\]|[^\s,;&)}\]\"']+)",
    re.IGNORECASE,
)
# password X, HF_TOKEN X, api key 'X': a name, a space, then a word that looks like a key (six or more
# characters with a letter and a digit, no space) so that prose ("the password for", "pad token '</s>'") stays.
_KEYLIKE = r"(?=[^\s'\"*]*[A-Za-z])(?=[^\s'\"*]*\d)[^\s'\"*,;]{6,1024}"
_SPACED = re.compile(
    r"(?<![\w.-])(" + _NAME.replace("api[_-]?key", "api[ _-]?key") + r"\s+)"
    r"('" + _KEYLIKE + r"'|\"" + _KEYLIKE + r"\"|" + _KEYLIKE + r"(?![^\s,;'\"]))",
    re.IGNORECASE,
)
# ?key=X, &sig=X, X-Amz-Signature=X: URL query parameters that carry keys or signatures
_QUERY = re.compile(
    r"([?&](?:key|sig|signature|x-amz-signature|x-amz-security-token|x-goog-signature|x-goog-credential|auth)=)"
    r"([^&\s#'\"]+)",
    re.IGNORECASE,
)
_NOT_SECRET = {"none", "null", "nil", "false", "true", "", "''", '""', "*", MASK, f"'{MASK}'", f'"{MASK}"'}

# Authorization: Bearer x / Authorization: Basic x / Authorization: x
_AUTH_HEADER = re.compile(
    r"((?<![\w-])['\"]?(?:proxy-)?authorization['\"]?\s*[:=]\s*['\"]?)(?:(bearer|basic|token|digest)\s+)?"
    r"([^\s'\",}]+)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?<![\w-])(bearer:?)\s+([A-Za-z0-9._~+/=-]+)", re.IGNORECASE)

# scheme://user:password@host. The password may hold `@` or `/` (unencoded, as people type them): it runs to
# the last `@` that a host name follows.
_URL_CREDS = re.compile(
    r"(\b[A-Za-z][A-Za-z0-9+.-]{0,30}:/{1,2})([^/\s:@'\"]*):([^\s'\"]{1,1024})@"
    r"(?=[A-Za-z0-9.\-\[\]:]+(?:[/\s'\"?#]|$))"
)
# scheme://TOKEN@host: a user name that is a key (20+ letters and digits, with a digit), as in a git clone URL
_URL_TOKEN_USER = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]{0,30}:/{1,2})(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{20,}@")

# Tokens recognisable by their shape wherever they appear.
_SHAPED: tuple[re.Pattern[str], ...] = (
    # Hugging Face: hf_ + 34 letters and digits. Require a digit or real length so that
    # identifiers like hf_transfer or hf_hub_download stay.
    re.compile(r"(?<![A-Za-z0-9])(hf_)(?:(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{8,}|[A-Za-z]{24,})(?![A-Za-z0-9])"),
    re.compile(r"(?<![\w-])(sk-)[A-Za-z0-9_-]{8,}"),  # OpenAI, Anthropic (sk-ant-…), sk-proj-…
    re.compile(r"(?<![A-Za-z0-9])(gh[pousr]_)[A-Za-z0-9]{20,}"),
    re.compile(r"(?<![A-Za-z0-9])(github_pat_)[A-Za-z0-9_]{20,}"),
    re.compile(r"(?<![A-Za-z0-9])(xox[abprs]-)[A-Za-z0-9-]{10,}"),
    re.compile(r"(?<![A-Za-z0-9])(AKIA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
    re.compile(r"(?<![A-Za-z0-9])(AIza)[0-9A-Za-z_-]{35}"),
    re.compile(r"(?<![A-Za-z0-9])(nvapi-)[A-Za-z0-9_-]{16,}"),
    re.compile(r"(?<![A-Za-z0-9])(glpat-)[A-Za-z0-9_-]{16,}"),  # GitLab
    re.compile(r"(?<![A-Za-z0-9])([sr]k_(?:live|test)_)[A-Za-z0-9]{10,}"),  # Stripe
    re.compile(r"(?<![A-Za-z0-9])(r8_)[A-Za-z0-9]{30,}"),  # Replicate
    re.compile(r"(?<![A-Za-z0-9_-])(eyJ[A-Za-z0-9_-]{5,}\.)eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),  # a JWT
)


def _mask_value(value: str) -> str:
    if value.startswith("Some(") and value.endswith(")"):  # Rust's Debug of an Option (TGI's args dump)
        return f"Some({_mask_value(value[5:-1])})"
    if value[:1] == "[" and value[-1:] == "]":
        return f"[{MASK}]" if value.strip("[] ") else value
    if value[:1] in "'\"" and value[-1:] == value[:1] and len(value) >= 2:
        return value[0] + MASK + value[0]
    return MASK


def _flag(m: re.Match[str]) -> str:
    values = m.group(3)
    if not m.group(2):  # one value; what follows it is the command line's next word
        first = re.match(_VALUE, values)
        assert first is not None
        return m.group(1) + _mask_value(first.group(0)) + values[first.end() :]
    return m.group(1) + " ".join(_mask_value(v) for v in values.split())


def _assign(m: re.Match[str]) -> str:
    value = m.group(2)
    bare = value[5:-1] if value.startswith("Some(") else value
    if value.lower() in _NOT_SECRET or bare.strip("'\"").lower() in _NOT_SECRET:
        return m.group(0)
    return m.group(1) + _mask_value(value)


def _auth(m: re.Match[str]) -> str:
    scheme = f"{m.group(2)} " if m.group(2) else ""
    return f"{m.group(1)}{scheme}{MASK}"


def redact(s: str) -> str:
    """The text with every secret it holds replaced by `***`."""
    if not s:
        return s
    for pattern in _SHAPED:
        s = pattern.sub(lambda m: m.group(1) + MASK, s)
    s = _URL_CREDS.sub(lambda m: f"{m.group(1)}{m.group(2)}:{MASK}@", s)
    s = _URL_TOKEN_USER.sub(lambda m: f"{m.group(1)}{MASK}@", s)
    s = _QUERY.sub(lambda m: m.group(1) + MASK, s)
    s = _AUTH_HEADER.sub(_auth, s)
    s = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", s)
    # Assignments before flags: a multi-key flag's words end at a quote, so a flag followed by an assignment
    # on one line (`--api_key K and api_key: Some("T")`) would mask the words up to it and leave its value.
    s = _ASSIGN.sub(_assign, s)
    s = _FLAG.sub(_flag, s)
    s = _SPACED.sub(lambda m: m.group(1) + _mask_value(m.group(2)), s)
    return s


def redact_obj(obj: Any) -> Any:
    """A JSON-like value (dicts, lists, strings) with every string redacted; for summaries and events."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v) for v in obj]
    return obj


__all__ = ["MASK", "redact", "redact_obj"]
