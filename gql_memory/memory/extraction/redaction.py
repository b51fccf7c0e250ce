"""The secret redaction gate (seed 002 ADR-005): denylisted secrets become ``[REDACTED]``.

Runs before anything is written to the database or to a log line. The families are the
seed's denylist — Bearer tokens, PEM private keys, AWS keys, GCP service accounts, e-mails,
URLs with credentials, JWTs and generic high-entropy tokens — each as strong as the seed's
pattern or stronger where the seed's would let part of a secret through (the body of a PEM
key, the private key inside a service-account JSON, non-http URLs with a password). The
generic-token heuristic carries the seed's calibration exclusions: pure hex (git SHAs, hex
digests), UUIDs, and, from our own calibration, base64 image data and lock-file integrity
hashes; a candidate must also look random, so long identifiers and paths are left alone.

All patterns run on RE2 (linear time), so no input can make the gate slow.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import re2

from gql_memory.config import (
    GENERIC_TOKEN_MIN_CHARS,
    RANDOM_PART_MIN_CHARS,
    RANDOM_TOKEN_MAX_WORDY_SHARE,
    RANDOM_TOKEN_MIN_ENTROPY_BITS,
    RANDOM_TOKEN_SAMPLE_CHARS,
    REDACTION_MARKER,
)

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False

# A line break inside a PEM block: a real one, or the two characters "\n" inside JSON.
_BREAK = r"(?:\r?\n|\\n)"


@dataclass(frozen=True)
class DenylistPattern:
    """One pattern of a family; ``is_exempt`` spares calibrated look-alikes of a match."""

    family: str
    regex: Any  # re2._Regexp (re2 ships no type stubs)
    is_exempt: Callable[[Any], bool] | None = None


_HEX_WITH_DASHES = re.compile(r"[0-9a-fA-F\-]+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_WORD_RUN = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_PART_SEPARATORS = re.compile(r"[_\-./+=]")
_CONSONANT_CLUSTER = re.compile(r"[^aeiouy]{5,}")
# Abbreviations common in identifiers and paths that do not read like words.
_ABBREVIATION_WORDS = (
    "api cfg cmd cpp crd ctx cxx dll dns dst env gcc gke gnu grpc html http https iam impl "
    "jdk json jvm jwt lib libs mgr msg mtls npm ntp pkg pkgs pnpm ptr rbac req rpc sdk sql src "
    "ssh ssl std str svc tcp tls tmp toml tty udp uri url usr www xml yaml"
)
_ABBREVIATIONS = frozenset(_ABBREVIATION_WORDS.split())
_HEX = re.compile(r"[0-9a-fA-F]+")
# base64 of image file headers: PNG, JPEG, GIF, WebP (RIFF), SVG ("<svg" / "<?xml").
_IMAGE_BASE64 = ("iVBORw0KGg", "/9j/", "R0lGOD", "UklGR", "PHN2Zy", "PD94bWwg")


def _entropy_bits(text: str) -> float:
    """Shannon entropy of the characters of ``text``, in bits per character."""
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _is_word(run: str) -> bool:
    """A run that reads like a word of an identifier: pronounceable, or a known abbreviation."""
    if not run.isalpha() or not 3 <= len(run) <= 20:
        return False
    lower = run.lower()
    if lower in _ABBREVIATIONS:
        return True
    vowels = sum(c in "aeiouy" for c in lower)
    return vowels / len(lower) >= 0.2 and _CONSONANT_CLUSTER.search(lower) is None


def looks_random(token: str) -> bool:
    """True for machine-made random strings (keys, tokens), false for identifiers and paths.

    Splits a bounded sample into words and digit runs (``userAccountId2`` -> user|Account|
    Id|2) and asks what share of its letters and digits sit in words that read like words.
    Identifiers and paths are made of words (80% and more); random base62/base64/base32 keys
    are not (typically 20-30%). Long pure-hex parts (digests) are left out of the count, per
    the seed's calibration; what remains must also carry enough entropy.
    """
    sample = token[:RANDOM_TOKEN_SAMPLE_CHARS]
    judged: list[str] = []
    for part in _PART_SEPARATORS.split(sample):
        if len(part) >= RANDOM_PART_MIN_CHARS and _HEX.fullmatch(part):
            continue
        judged.extend(_WORD_RUN.findall(part))
    characters = sum(len(run) for run in judged)
    if characters < RANDOM_PART_MIN_CHARS:
        return False
    wordy = sum(len(run) for run in judged if _is_word(run))
    return wordy / characters < RANDOM_TOKEN_MAX_WORDY_SHARE and (
        _entropy_bits("".join(judged)) >= RANDOM_TOKEN_MIN_ENTROPY_BITS
    )


def _calibrated_non_secret(match: Any) -> bool:
    """The calibration exclusions of ADR-005 (and ours): these candidates are not secrets."""
    if match.group(1):  # data:...;base64, image data, sha512-... SRI hash, go.sum h1: hash
        return True
    core = match.group(2).rstrip("=")
    if _HEX_WITH_DASHES.fullmatch(core):  # git SHAs, hex digests, UUIDs joined by dashes
        return True
    if core.startswith(_IMAGE_BASE64):
        return True
    rest = _UUID.sub("", core[: 2 * RANDOM_TOKEN_SAMPLE_CHARS])
    if len(rest) < GENERIC_TOKEN_MIN_CHARS // 2:  # an id made of a UUID and a short prefix
        return True
    return not looks_random(rest)


def _pattern(
    family: str, regex: str, exempt: Callable[[Any], bool] | None = None
) -> DenylistPattern:
    return DenylistPattern(family, re2.compile(regex, _OPTIONS), exempt)


# Order matters: a match becomes [REDACTED] before the next pattern runs, so the specific
# families (whose counts say what was found) run before the generic token heuristic.
DENYLIST: tuple[DenylistPattern, ...] = (
    # GCP service account: the seed's marker, and the key fields it exists to protect (the
    # closing quotes are optional: a summarizer may have cut the line right before one).
    _pattern("gcp_service_account", r'(?i)"type"\s*:\s*"service_account'),
    _pattern("gcp_service_account", r'"private_key(?:_id)?"\s*:\s*"[^"]*"?'),
    # PEM private key: the whole block; a block cut short (no END) up to its last base64
    # line; and the tail of a block whose BEGIN was cut off.
    _pattern(
        "pem_private_key",
        r"-----BEGIN[A-Z ]*PRIVATE KEY-----(?:[\s\S]*?-----END[A-Z ]*PRIVATE KEY-----"
        rf"|(?:{_BREAK}[A-Za-z0-9+/=]+)*)",
    ),
    _pattern("pem_private_key", rf"(?:[A-Za-z0-9+/=]+{_BREAK})*-----END[A-Z ]*PRIVATE KEY-----"),
    # URL with credentials, any scheme (postgres://, redis://, https://, ...).
    _pattern("url_credentials", r"(?i)\b[a-z][a-z0-9+.\-]*://[^@\s/:]*:[^@\s/]+@"),
    _pattern("bearer_token", r"(?i)\bBearer\s+\S+"),
    _pattern("jwt", r"eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+"),
    # AWS: access key ids (long-term AKIA, temporary ASIA) and secret access keys.
    _pattern("aws_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    _pattern(
        "aws_key",
        r"(?i)\b(?:aws_?)?secret_?access_?key[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9/+=]{40}",
    ),
    # E-mail; the top-level domain must be letters, so "lodash@4.17.21" is not an address.
    _pattern("email", r"\b[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)*\.[A-Za-z]{2,}\b"),
    # Generic token: >= 40 characters of base64/base64url alphabet; group 1 marks the
    # prefixes of content hashes and image data, which are exempt.
    _pattern(
        "generic_token",
        r"(data:[\w/+.\-]+;base64,|\bsha(?:1|256|384|512)-|\bh1:)?"
        rf"([A-Za-z0-9_\-+/]{{{GENERIC_TOKEN_MIN_CHARS},}}={{0,2}})",
        _calibrated_non_secret,
    ),
)
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(p.family for p in DENYLIST))


@dataclass(frozen=True)
class Redaction:
    """Redacted text, how many secrets of each family were replaced, and what share."""

    text: str
    counts: dict[str, int] = field(default_factory=dict)
    redacted_fraction: float = 0.0

    @property
    def applied(self) -> bool:
        return bool(self.counts)


def redact(text: str) -> Redaction:
    """Replace every denylisted secret in ``text`` with ``[REDACTED]``."""
    counts: Counter[str] = Counter()
    result = text
    for pattern in DENYLIST:
        found = 0

        def replace(match: Any, pattern: DenylistPattern = pattern) -> str:
            nonlocal found
            if pattern.is_exempt is not None and pattern.is_exempt(match):
                return str(match.group(0))
            found += 1
            return REDACTION_MARKER

        result = pattern.regex.sub(replace, result)
        if found:
            counts[pattern.family] += found
    if not counts:
        return Redaction(text)
    surviving = len(result) - len(REDACTION_MARKER) * result.count(REDACTION_MARKER)
    fraction = 1.0 - max(0, surviving) / len(text) if text else 0.0
    return Redaction(result, dict(counts), round(min(1.0, max(0.0, fraction)), 4))


def redact_json(value: Any) -> tuple[Any, dict[str, int]]:
    """Redact every string inside a JSON value (keys stay); returns it and the counts."""
    counts: Counter[str] = Counter()

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            redaction = redact(item)
            counts.update(redaction.counts)
            return redaction.text
        if isinstance(item, dict):
            return {key: walk(inner) for key, inner in item.items()}
        if isinstance(item, list):
            return [walk(inner) for inner in item]
        return item

    return walk(value), dict(counts)
