"""The rule table: each format found, its look-alikes left alone, redaction stable and idempotent."""

from __future__ import annotations

import functools
import itertools
import json
import re
from random import Random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safepoint.errors import InvalidArgument
from safepoint.scrub.engine.rule import Finding, Rule
from safepoint.scrub.engine.scanner import RuleScanner
from safepoint.scrub.pii import PII_KINDS, PII_RULES, card_valid, iban_valid, luhn_valid
from safepoint.scrub.rules import SECRET_RULES, default_scanner, pii_rules
from safepoint.scrub.token_rules.value_checks import looks_like_secret_value, shannon_entropy
from scrub_corpus.fakes import FAKES, near_misses
from scrub_corpus.traffic import mixed_traffic

SECRET_NAMES = [rule.name for rule in SECRET_RULES]
ALL_NAMES = SECRET_NAMES + list(PII_KINDS)
NEAR_MISSES = near_misses(Random(7))


def scanner_for(name: str) -> RuleScanner:
    return default_scanner(pii=(name,) if name in PII_KINDS else ())


def test_every_rule_has_positive_and_negative_cases() -> None:
    """Adding a rule (or a PII kind) without fakes and look-alikes fails here."""
    assert sorted(FAKES) == sorted(ALL_NAMES)
    assert sorted(NEAR_MISSES) == sorted(ALL_NAMES)
    assert all(NEAR_MISSES[name] for name in ALL_NAMES)
    assert sorted(rule.kind for rule in PII_RULES) == sorted(PII_KINDS)
    assert PII_RULES[-1].kind == "phone"  # the loosest layout loses ties (an SSN is not a phone number)
    assert all(rule.description for rule in (*SECRET_RULES, *PII_RULES))


@pytest.mark.parametrize("name", ALL_NAMES)
def test_rule_finds_its_format_in_text(name: str) -> None:
    """Fifty generated values of each format, inside a sentence, are redacted under the rule's name."""
    scanner = scanner_for(name)
    for seed in range(50):
        snippet, secret = FAKES[name](Random(seed))
        text = f"step 3 output:\n{snippet}\n(end)"
        redacted, hits, _ = scanner.redact(text)
        assert secret not in redacted, (name, seed)
        assert name in hits, (name, seed, hits)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_rule_leaves_look_alikes_alone(name: str) -> None:
    """Wrong length, wrong alphabet, placeholders, hashes and ids are not matched by the rule."""
    scanner = scanner_for(name)
    for text in NEAR_MISSES[name]:
        assert [f for f in scanner.find(text) if f.rule == name] == [], text


@pytest.mark.parametrize(
    "text",
    [
        "password=changeme",
        "token=${TOKEN}",
        "api_key=<your-key>",
        "password=********",
        'secret = os.environ["X"]',
        "DB_PASSWORD=${DB_PASSWORD}",
        "TWINE_PASSWORD: ${{ secrets.PYPI_TOKEN }}",
        'headers = {"Authorization": f"Bearer {api_token}"}',
        "password = getpass.getpass()",
        '"usage": {"prompt_tokens": 1234, "completion_tokens": 56, "total_tokens": 1290}',
        "The password must have 12 characters; the token expires in 3600 s.",
    ],
)
def test_placeholders_and_prose_match_nothing(text: str) -> None:
    """Placeholders, code that fetches a secret, and prose about secrets are not secrets."""
    assert default_scanner(PII_KINDS).find(text) == []


def test_only_the_secret_group_is_redacted() -> None:
    """In key=value and scheme://user:password@host, the key, user and host stay readable."""
    scanner = default_scanner()
    value = FAKES["credential-assignment"](Random(1))[1]
    assert scanner.redact(f"DB_PASSWORD={value}")[0] == "DB_PASSWORD=[REDACTED:credential-assignment]"
    assert (
        scanner.redact(f'{{"password": "{value}"}}')[0] == '{"password": "[REDACTED:credential-assignment]"}'
    )
    url = f"postgresql://svc:{value}@db.internal:5432/app"
    assert scanner.redact(url)[0] == "postgresql://svc:[REDACTED:url-password]@db.internal:5432/app"
    assert (
        scanner.redact(f"Authorization: Bearer {value}xyz")[0]
        == "Authorization: Bearer [REDACTED:authorization-header]"
    )


@pytest.mark.parametrize("newline", ["\n", "\\n", "\r\n"])
@pytest.mark.parametrize("kind", ["RSA ", "EC ", "OPENSSH ", "ENCRYPTED ", "", "PGP "])
def test_private_key_blocks_in_every_encoding(newline: str, kind: str) -> None:
    """PEM keys with real or JSON-escaped newlines are redacted whole, and a truncated one loses its body."""
    scanner = default_scanner()
    block, first_line = FAKES["private-key"](Random(3))
    block = block.replace("RSA ", kind).replace("EC ", kind).replace("\\n", "\n").replace("\r\n", "\n")
    text = json.dumps(block)[1:-1] if newline == "\\n" else block.replace("\n", newline)
    assert scanner.redact(f"key:\n{text}\nok")[0] == "key:\n[REDACTED:private-key]\nok"
    truncated = text[: len(text) // 2]
    redacted = scanner.redact(truncated)[0]
    assert first_line not in redacted
    assert redacted.startswith("[REDACTED:private-key]")


@pytest.mark.parametrize(
    "key",
    ["API_KEY", "api_key", "apiKey", "ApiKey", "X-Api-Key", "x-api-key", "Password", "SECRET", "accessToken"],
)
def test_key_names_in_every_case_style(key: str) -> None:
    """snake_case, SCREAMING_CASE, camelCase, PascalCase and Header-Case key names are all seen."""
    value = FAKES["credential-assignment"](Random(5))[1]
    assert default_scanner().redact(f"{key}: {value}")[1] == ["credential-assignment"]


def test_redact_returns_the_same_object_when_clean() -> None:
    """The fast path: nothing found means the very same str object and no names."""
    text = "".join(["nothing ", "secret ", "here: ", "just prose about tokens."])
    redacted, hits, marks = default_scanner(PII_KINDS).redact(text)
    assert redacted is text
    assert marks == []
    assert hits == []


@pytest.mark.parametrize("name", ALL_NAMES)
def test_markers_never_match(name: str) -> None:
    """A marker, alone or where the secret was, is never matched again."""
    scanner = default_scanner(PII_KINDS)
    marker = f"[REDACTED:{name}]"
    for text in (
        marker,
        f"password={marker}",
        f'"api_key": "{marker}"',
        f"postgresql://svc:{marker}@db:5432/app",
        f"Authorization: Bearer {marker}",
        "postgresql://svc:[SECRET:DB_PASSWORD]@db:5432/app",
        '"token": "[SECRET:API_KEY|json]"',
    ):
        assert scanner.find(text) == [], text


@pytest.mark.parametrize("name", ALL_NAMES)
def test_redaction_is_idempotent(name: str) -> None:
    """Redacting redacted text changes nothing."""
    scanner = default_scanner(PII_KINDS)
    for seed in range(20):
        snippet = FAKES[name](Random(seed))[0]
        once, _, marks = scanner.redact(f"a {snippet} b")
        assert scanner.redact(once, keep=marks) == (once, [], marks)


def test_a_token_glued_to_a_redacted_one_goes_too() -> None:
    """A token whose boundary only shows once its neighbour is a marker is redacted in the same call."""
    block = FAKES["private-key"](Random(0))[0]
    key = FAKES["anthropic-api-key"](Random(0))[0]
    redacted, hits, _ = default_scanner().redact(block + key)
    assert redacted == "[REDACTED:private-key][REDACTED:anthropic-api-key]"
    assert hits == ["private-key", "anthropic-api-key"]


def test_rule_names_must_make_recognisable_markers() -> None:
    """Rule names are unique and marker-safe (no spaces or brackets), else InvalidArgument."""
    rule = Rule("ok-name", re.compile("x"), ("x",))
    with pytest.raises(InvalidArgument, match="unique"):
        RuleScanner([rule, rule])
    with pytest.raises(InvalidArgument, match="'my rule'"):
        RuleScanner([Rule("my rule", re.compile("x"), ("x",))])


def test_findings_are_sorted_and_do_not_overlap() -> None:
    """Several secrets in one text come back in order, without overlaps."""
    rng = Random(11)
    parts = [
        FAKES[name](rng)[0] for name in ("github-token", "jwt", "stripe-key", "npm-token", "slack-token")
    ]
    findings = default_scanner().find(" | ".join(parts))
    assert [f.rule for f in findings] == ["github-token", "jwt", "stripe-key", "npm-token", "slack-token"]
    assert all(a.end <= b.start for a, b in itertools.pairwise(findings))


def test_overlap_goes_to_the_longer_then_the_earlier_rule() -> None:
    """On overlap the longer match wins; on a tie, the rule listed first."""
    short = Rule("short", re.compile(r"abc"), ("abc",))
    long = Rule("long", re.compile(r"abc\d+"), ("abc",))
    twin = Rule("twin", re.compile(r"abc\d+"), ("abc",))
    assert RuleScanner([short, long]).find("x abc123 y") == [Finding(2, 8, "long")]
    assert RuleScanner([long, twin]).find("x abc123 y") == [Finding(2, 8, "long")]
    assert RuleScanner([twin, long]).find("x abc123 y") == [Finding(2, 8, "twin")]


def test_rules_without_triggers_and_rules_reaching_back() -> None:
    """A trigger-less rule scans the whole text; a rule may begin before its trigger (reach_before)."""
    digits = Rule("digits", re.compile(r"\d{4}"), ())
    before = Rule("kv", re.compile(r"[a-z]+=(?P<secret>\d+)"), ("=",), spellings=("=",), reach_before=10)
    scanner = RuleScanner([digits, before])
    assert scanner.find("id 1234, count=7") == [Finding(3, 7, "digits"), Finding(15, 16, "kv")]
    assert scanner.might_match("nothing")  # a trigger-less rule makes every text a candidate
    assert not RuleScanner([before]).might_match("no equals sign")


def test_triggers_are_lowercase_and_inside_every_match() -> None:
    """Any prefilter may lower the text and look for triggers: every fake holds one of its rule's."""
    for rule in (*SECRET_RULES, *PII_RULES):
        assert all(t == t.lower() for t in rule.triggers), rule.name
        assert {s.lower() for s in rule.spellings} <= set(rule.triggers), rule.name
        if rule.triggers:
            for seed in range(10):
                snippet = FAKES[rule.name if rule.kind == "secret" else rule.kind](Random(seed))[0]
                assert any(t in snippet.lower() for t in rule.triggers), (rule.name, seed)


def test_pii_kinds_are_checked() -> None:
    """An unknown PII kind is an InvalidArgument listing the known ones; scanners are cached per kind set."""
    with pytest.raises(InvalidArgument, match="unknown PII kind"):
        pii_rules(["email", "passport"])
    with pytest.raises(InvalidArgument, match="unknown PII kind"):
        default_scanner(pii=["passport"])
    assert default_scanner(["email", "card"]) is default_scanner(("card", "email"))
    assert default_scanner() is not default_scanner(["email"])
    assert [rule.kind for rule in pii_rules(["iban", "email"])] == ["email", "iban"]


@pytest.mark.parametrize(
    "number",
    ["4111111111111111", "5555555555554444", "378282246310005", "6011111111111117", "3530111333300000",
     "4012888888881881", "2221000000000009", "30569309025904", "6200000000000005"],
)  # fmt: skip
def test_luhn_and_card_accept_known_test_numbers(number: str) -> None:
    """The networks' published test card numbers pass Luhn and the issuer check, printed as on a card."""
    assert luhn_valid(number)
    groups = {16: (4, 4, 4, 4), 15: (4, 6, 5), 14: (4, 6, 4)}[len(number)]
    starts = [sum(groups[:i]) for i in range(len(groups))]
    printed = " ".join(number[start : start + size] for start, size in zip(starts, groups, strict=True))
    assert card_valid(printed)
    assert card_valid(printed.replace(" ", "-"))
    assert card_valid(number) == (len(number) in (15, 16))  # other unbroken lengths are ids, not cards


@pytest.mark.parametrize(
    "number", ["4111111111111112", "1234567812345678", "79927398710", "9111111111111111"]
)
def test_luhn_or_card_reject_invalid_numbers(number: str) -> None:
    """A wrong check digit or an unknown issuer prefix is not a card."""
    assert not card_valid(number)
    assert luhn_valid("79927398713")
    assert not luhn_valid("79927398710")
    assert not luhn_valid("12a4")


@pytest.mark.parametrize(
    "iban",
    ["GB82WEST12345698765432", "DE89370400440532013000", "FR1420041010050500013M02606", "NL91ABNA0417164300",
     "BE68539007547034", "CH9300762011623852957", "ES9121000418450200051332", "IT60X0542811101000000123456",
     "GB82 WEST 1234 5698 7654 32", "NO9386011117947"],
)  # fmt: skip
def test_iban_accepts_registry_examples(iban: str) -> None:
    """The IBAN registry's example numbers pass length and mod-97."""
    assert iban_valid(iban)


@pytest.mark.parametrize(
    "iban",
    ["GB82WEST12345698765433", "DE89370400440532013001", "XX89370400440532013000", "DE8937040044053201300"],
)
def test_iban_rejects_bad_check_digits_country_or_length(iban: str) -> None:
    """One changed digit, an unknown country or a wrong length fails."""
    assert not iban_valid(iban)


def test_odd_text_is_scanned_without_error() -> None:
    """Lone surrogates, NUL, emoji and combining marks neither raise nor hide a token."""
    token = FAKES["github-token"](Random(9))[0]
    text = f"\ud800\x00 \U0001f600 e\u0301 {token} \u200b"
    redacted, hits, _ = default_scanner(PII_KINDS).redact(text)
    assert token not in redacted
    assert hits == ["github-token"]


def test_value_checks() -> None:
    """Entropy and the value check tell generated secrets from words, code and placeholders."""
    assert shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("abcd") == 2.0
    rng = Random(2)
    assert all(looks_like_secret_value(FAKES["credential-assignment"](rng)[1]) for _ in range(200))
    words_code_placeholders = (
        *("my_service_token_2024", "settings.DB_PASSWORD", "ThisIsMyPassword", "2024-05-09T07:35:25Z"),
        *("${DB_PASSWORD}", "/run/secrets/db", "changeme123", "https://example.org/x", "1.2.3"),
    )
    for value in words_code_placeholders:
        assert not looks_like_secret_value(value), value


# -- property: planted tokens never survive --------------------------------------------


@functools.cache
def filler_lines() -> tuple[str, ...]:
    return tuple(
        line for chunk in mixed_traffic(60_000, seed=3) for line in chunk.splitlines() if line.strip()
    )


filler = st.one_of(
    st.text(max_size=40),
    st.integers(min_value=0).map(lambda i: filler_lines()[i % len(filler_lines())]),
)


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(filler, min_size=1, max_size=8),
    plants=st.lists(
        st.tuples(st.sampled_from(SECRET_NAMES), st.integers(0, 2**32), st.integers(min_value=0)),
        min_size=1,
        max_size=4,
    ),
    separator=st.sampled_from([" ", "\n", " \n ", "\t", ";", ")", ", ", "<br>", "|", "\\n"]),
)
def test_planted_tokens_never_survive(
    pieces: list[str], plants: list[tuple[str, int, int]], separator: str
) -> None:
    """Tokens of random rules planted at random places in random or realistic text never survive."""
    scanner = default_scanner()
    secrets = []
    for name, seed, where in plants:
        snippet, secret = FAKES[name](Random(seed))
        pieces.insert(where % (len(pieces) + 1), snippet)
        secrets.append(secret)
    redacted, hits, marks = scanner.redact(separator.join(pieces))
    assert all(secret not in redacted for secret in secrets)
    assert len(hits) >= 1
    assert scanner.redact(redacted, keep=marks) == (redacted, [], marks)  # and a second one is a no-op
