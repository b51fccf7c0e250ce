"""The redaction gate (seed 002 ADR-005): every secret family, the calibration, the bounds."""

from __future__ import annotations

import random
import string
from collections import Counter

import pytest

from gql_memory.memory.extraction.redaction import FAMILIES, redact, redact_json
from gql_memory.memory.extraction.summarizers import first_last_500, stdout_summary
from tests.memory.extraction.redaction_corpus import BASE62, BASE64, LOOKALIKES, SECRETS, rand
from tests.scaling import growth

FP_RATE_GATE = 0.15  # ADR-005 calibration: at most 15% of look-alikes may be touched


def test_corpus_is_big_enough_and_covers_every_family() -> None:
    assert len(SECRETS) >= 50 and len(LOOKALIKES) >= 50
    assert set(Counter(s.family for s in SECRETS)) == set(FAMILIES)
    kinds = {item.kind for item in LOOKALIKES}
    assert {"git sha", "uuid", "base64 image", "long identifier", "lock hash"} <= kinds


@pytest.mark.parametrize("sample", SECRETS, ids=lambda s: s.family)
def test_every_secret_of_the_corpus_is_redacted(sample) -> None:
    result = redact(sample.text)
    leaked = [secret for secret in sample.secrets if secret in result.text]
    assert leaked == []
    assert result.counts.get(sample.family, 0) >= 1, result.counts
    assert "[REDACTED]" in result.text and result.applied


def test_false_positive_rate_on_lookalikes_is_within_the_gate() -> None:
    touched = [item for item in LOOKALIKES if redact(item.text).applied]
    rate = len(touched) / len(LOOKALIKES)
    print(
        f"\nredaction false-positive rate: {len(touched)}/{len(LOOKALIKES)} = {rate:.1%} "
        f"({', '.join(item.kind for item in touched) or 'none'})"
    )
    assert rate <= FP_RATE_GATE


@pytest.mark.parametrize(
    "text",
    [
        "commit 3f786850e387550fdab836ed7e6dc881de23001b",
        "id 550e8400-e29b-41d4-a716-446655440000",
        "550e8400-e29b-41d4-a716-446655440000-6ba7b810-9dad-11d1-80b4-00c04fd430c8",
        "digest " + "ab" * 32,
        "integrity sha512-" + "Qm9vYmFy" * 11 + "==",
    ],
)
def test_calibration_exclusions_leave_hex_shas_uuids_and_lock_hashes_alone(text: str) -> None:
    assert redact(text).text == text


def test_long_random_tokens_are_redacted_but_not_shorter_than_40() -> None:
    token = rand("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", 40)
    assert redact(f"key {token} end").text == "key [REDACTED] end"
    assert redact(f"key {token[:39]} end").applied is False


def test_counts_and_fraction_describe_what_was_redacted() -> None:
    text = "mail a@example.com and b@example.org, key AKIAABCDEFGHIJKLMNOP"
    result = redact(text)
    assert result.counts == {"email": 2, "aws_key": 1}
    assert result.text == "mail [REDACTED] and [REDACTED], key [REDACTED]"
    secret_chars = len("a@example.com") + len("b@example.org") + len("AKIAABCDEFGHIJKLMNOP")
    assert result.redacted_fraction == pytest.approx(secret_chars / len(text), abs=1e-3)
    assert redact("nothing here").redacted_fraction == 0.0


def test_json_values_are_redacted_and_keys_kept() -> None:
    value, counts = redact_json({"user": "x@example.com", "n": 1, "list": ["Bearer abcdef123"]})
    assert value == {"user": "[REDACTED]", "n": 1, "list": ["[REDACTED]"]}
    assert counts == {"email": 1, "bearer_token": 1}


def test_a_private_key_cut_by_a_summarizer_leaves_no_line_behind() -> None:
    body = [rand(BASE64, 64) for _ in range(60)]
    key = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END RSA PRIVATE KEY-----"
    for output in (
        key,  # BEGIN in the head, END in the tail
        "x\n" * 10 + key,
        key.split("-----END")[0] + "y " * 400,  # END cut away entirely
        "z " * 400 + key.split("-----\n", 1)[1],  # BEGIN cut away entirely
    ):
        for summary in (first_last_500(output, 10**6), stdout_summary(output, 10**6)):
            redacted = redact(summary).text
            assert not [line for line in body if line[:30] in redacted]


def adversarial(chars: int) -> list[str]:
    """Inputs that would make a backtracking or rescanning redactor superlinear."""
    return [
        "a" * chars,
        "a@" * (chars // 2),
        "https://" + "a:" * (chars // 2),
        "-----BEGIN PRIVATE KEY-----" + "\nA" * (chars // 2),
        rand("abcXYZ019", chars),
    ]


def test_redaction_is_linear_even_on_adversarial_megabytes() -> None:
    """16 times the input costs about 16 times the CPU time (quadratic would be 256)."""
    for small, large in zip(adversarial(62_500), adversarial(1_000_000), strict=True):
        assert growth(redact, small, large) < 64, large[:40]


@pytest.mark.parametrize(
    ("alphabet", "minimum_recall"),
    [
        (BASE62, 1.0),
        (BASE64, 1.0),
        (BASE62 + "-_", 1.0),
        (string.ascii_lowercase + string.digits, 0.99),
        (string.ascii_uppercase + string.digits, 0.99),
        ("abcdefghijklmnopqrstuvwxyz234567", 0.98),
    ],
    ids=["base62", "base64", "base64url", "base36", "BASE36", "base32"],
)
def test_random_40_character_keys_are_caught_by_the_generic_heuristic(
    alphabet: str, minimum_recall: float
) -> None:
    rng = random.Random(alphabet)
    keys = ["".join(rng.choice(alphabet) for _ in range(40)) for _ in range(2000)]
    caught = sum(redact(f"key={key}\n").text == "key=[REDACTED]\n" for key in keys)
    print(f"\ngeneric-token recall on random 40-char keys: {caught / len(keys):.2%}")
    assert caught / len(keys) >= minimum_recall
