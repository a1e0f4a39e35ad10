"""The scrubber's look: one pass over a value's encoded bytes says "walk" wherever the old path did.

The old path decoded each value's JSON and asked a regex for the stored shapes
and each step's ``might_match`` (str automata); the look runs all of their
words in one automaton over the bytes. These tests keep the old verdict as the
oracle: over random text with triggers, secrets, shapes and real-format tokens
planted raw, JSON-escaped (once, twice), URL-encoded and base64-encoded, the
look answers exactly as the old path, and whenever the exact walk would replace
or report anything, the look said "walk". Counter names proven on one save are
not looked at again, until the registered secrets change.
"""

from __future__ import annotations

import base64
import json
import re
from random import Random
from typing import Any
from urllib.parse import quote

import pytest
from ahocorasick_rs import AhoCorasick, Implementation
from hypothesis import event, given, settings
from hypothesis import strategies as st

import safepoint
from safepoint import Checkpoint, codec
from safepoint.scrub import Found, Scrubber, Secrets
from safepoint.scrub.automata import Matcher
from safepoint.scrub.encodings import every_encoding
from safepoint.scrub.engine.rule import case_variants
from safepoint.scrub.look import ByteWords
from safepoint.scrub.rules import SECRET_RULES
from scrub_corpus.fakes import FAKES

KEY = "sk-live-Zq81mXc0PfLw2RkT9vYb"
PASSWORD = 'pa"ss\\word/with+plus&=%é'
SECRETS = {"API_KEY": KEY, "DB_PASSWORD": PASSWORD}
SCRUBBERS = {
    "rules-and-secrets": Scrubber(secrets=Secrets(SECRETS)),
    "secrets-only": Scrubber(secrets=Secrets(SECRETS), rules=False),
    "rules-only": Scrubber(),
}


def _variants(triggers: tuple[str, ...]) -> set[str]:
    return {spelling for trigger in triggers for spelling in case_variants(trigger)}


# Every trigger spelling the rules are looked for in (the look adds their JSON-escaped forms itself).
TRIGGERS = sorted({word for rule in SECRET_RULES for word in set(rule.spellings) or _variants(rule.triggers)})
# The look before it ran in one pass: the stored shapes' regex, then each step's prefilter on the text.
_OLD_SHAPES = re.compile(r'"\$|\[(?:SECRET|REDACTED):')


def old_needs_walk(scrubber: Scrubber, text: str) -> bool:
    if _OLD_SHAPES.search(text):
        return True
    return any(step.might_match(text) for step in scrubber.steps)  # type: ignore[attr-defined]


def wrapped(text: str, width: int) -> str:
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


def forms(piece: str) -> list[str]:
    """How a harness may write ``piece`` into text: raw, JSON-escaped once or twice, URL, base64."""
    raw = piece.encode()
    return [
        piece,
        json.dumps(piece)[1:-1],
        json.dumps(json.dumps(piece))[1:-1],
        quote(piece, safe=""),
        base64.b64encode(raw).decode(),
        base64.b64encode(b"user:" + raw).decode(),  # inside a longer base64 text (a Basic header)
        wrapped(base64.b64encode(b"x" * 40 + raw + b"y" * 40).decode(), 19),  # across line breaks
    ]


secret_forms = st.sampled_from(
    sorted({text for value in SECRETS.values() for text in [*every_encoding(value).values(), *forms(value)]})
)
trigger_forms = st.sampled_from(TRIGGERS).flatmap(lambda word: st.sampled_from(forms(word)))
tokens = st.tuples(st.sampled_from(sorted(FAKES)), st.integers(0, 2**16)).map(
    lambda pick: FAKES[pick[0]](Random(pick[1]))[0]
)
shapes = st.sampled_from(["[SECRET:API_KEY]", "[SECRET:X|json]", "[REDACTED:jwt]", "$ref", "[REDACTED:", "$"])
plain = st.one_of(st.text(max_size=30), st.text(alphabet="abcdefghijklmnopqrstuvwxyz ", max_size=60))
# Plain text more often than the planted kinds, so that about a quarter of the values look clean and
# the exact walk is held to that verdict on many of them.
pieces = st.one_of(plain, plain, plain, plain, plain, plain, secret_forms, trigger_forms, tokens, shapes)
texts = st.lists(pieces, max_size=4).flatmap(
    lambda parts: st.sampled_from(["", " ", "\n", "\\n", "="]).map(lambda glue: glue.join(parts))
)
plain_keys = st.sampled_from(["role", "content", "name", "args"])
keys = st.one_of(
    plain_keys, plain_keys, plain_keys, st.sampled_from(["$secret", "$$x", "$", "tokens_in"]), texts
)
values: st.SearchStrategy[Any] = st.recursive(
    st.one_of(texts, st.integers(), st.none()),
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(keys, children, max_size=3)),
    max_leaves=6,
)


@settings(max_examples=400, deadline=None)
@given(value=st.dictionaries(keys, values, min_size=1, max_size=3), which=st.sampled_from(sorted(SCRUBBERS)))
def test_the_one_pass_look_walks_wherever_the_old_look_and_the_walk_would(
    value: dict[str, Any], which: str
) -> None:
    scrubber = SCRUBBERS[which]
    try:
        encoded = codec.encode(value)
    except TypeError:
        return  # (a lone surrogate: no JSON text, so such a value is always walked)
    look = scrubber.needs_walk_encoded(encoded)
    event(f"look says walk: {look}")
    assert look == old_needs_walk(scrubber, encoded.decode())
    if not look:  # the exact steps would have replaced and reported nothing
        scrubbed, found = scrubber.scrub(value, "messages[0]", checked=True)
        assert scrubbed == value
        assert not found.counts
    # The store's message path (scrub_encoded) agrees with the walk's result either way.
    scrubbed, found = scrubber.scrub(value, "messages[0]", checked=True)
    value_out, body = scrubber.scrub_encoded(value, encoded, "messages[0]", Found("reference", "messages"))
    assert value_out == scrubbed
    assert body == codec.encode(scrubbed)


@pytest.mark.parametrize("word", TRIGGERS)
def test_every_trigger_spelling_wakes_the_look_in_a_value_s_json(word: str) -> None:
    """Each rule trigger in a string, as the value's JSON writes it (a backslash escaped)."""
    assert SCRUBBERS["rules-only"].needs_walk_encoded(codec.encode({"content": f"see {word} here"}))
    assert SCRUBBERS["rules-only"].needs_walk_encoded(codec.encode({f"{word}_x": 1}))


@pytest.mark.parametrize("encoding", sorted(every_encoding(PASSWORD)))
def test_a_registered_secret_wakes_the_look_in_every_encoding(encoding: str) -> None:
    text = every_encoding(PASSWORD)[encoding]
    encoded = codec.encode({"content": f"before {text} after"})
    assert SCRUBBERS["secrets-only"].needs_walk_encoded(encoded)
    _, found = SCRUBBERS["secrets-only"].scrub({"content": f"before {text} after"}, "state", checked=True)
    assert found.counts


MATCHER: Matcher[bool] = Matcher(dict.fromkeys(TRIGGERS, True))
BY_TEXT = AhoCorasick(TRIGGERS, implementation=Implementation.DFA)  # how every text was searched before


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(alphabet="ab-_:/\\tokensecrt", max_size=300),
    plant=st.sampled_from(TRIGGERS),
    at=st.integers(min_value=0),
    other=st.sampled_from(["", "é", "\ud800", "😀"]),
)
def test_a_text_is_searched_with_the_same_matches_ascii_or_not(
    text: str, plant: str, at: int, other: str
) -> None:
    """The rule automaton finds the same matches at the same character offsets whether the text is
    ASCII (searched as its bytes) or not (a non-ASCII character, a lone surrogate, planted first)."""
    at %= len(text) + 1
    text = other + text[:at] + plant + text[at:]
    for overlapping in (False, True):
        expected = BY_TEXT.find_matches_as_indexes(text.replace("\ud800", "\ufffd"), overlapping=overlapping)
        assert MATCHER._search(text, overlapping) == expected


def test_a_word_across_each_cut_of_a_long_text_is_seen() -> None:
    """Long bytes are looked at in growing pieces: a word straddling any cut is still found."""
    words = ByteWords(["tokens", "[REDACTED:"])
    for cut in (8192, 8192 + 16 * 8192):
        for shift in range(-10, 3):
            data = b"a" * (cut + shift) + b"[REDACTED:" + b"a" * 300_000
            assert words.any(data)
    assert not words.any(b"a" * 400_000)
    assert words.any(memoryview(b"x" * 10 + b"tokens"))


def header_store(secrets: Secrets) -> Any:
    return safepoint.open_store("memory://", scrubber=Scrubber(secrets=secrets))


def test_counter_names_are_proven_once_and_again_after_the_secrets_change() -> None:
    """A counter named "tokens_in" does not wake a walk on every save; a name that becomes a
    registered secret later is replaced on the next save all the same."""
    name = "quarterly-budget-counter"
    secrets = Secrets({"API_KEY": KEY})
    scrubber = Scrubber(secrets=secrets)
    counters = {"tokens_in": 3, name: 1}
    header = codec.encode(({"phase": "work"}, {}, counters))
    assert scrubber.header_needs_walk(header, counters)  # "tokens_in" holds a trigger
    found = Found("reference", "state")
    _, _, stored = scrubber.scrub_fields({"state": {"phase": "work"}}, {}, counters, found, checked=True)
    assert stored == counters
    assert not scrubber.header_needs_walk(header, counters)  # proven: left out of the look
    dirty = ({"phase": KEY}, {}, counters)
    assert scrubber.header_needs_walk(codec.encode(dirty), counters)  # the rest is still looked at
    secrets.add("BUDGET", name)
    assert scrubber.header_needs_walk(header, counters)
    found = Found("reference", "state")
    _, _, stored = scrubber.scrub_fields({"state": {"phase": "work"}}, {}, counters, found, checked=True)
    assert name not in json.dumps(stored)
    assert found.counts


def test_a_store_scrubs_a_counter_name_that_became_a_secret_between_saves() -> None:
    name = "quarterly-budget-counter"
    secrets = Secrets({"API_KEY": KEY})
    store = header_store(secrets)
    cp = Checkpoint(run_id="r")
    for step in range(3):
        cp.step = step
        cp.counters["tokens_in"] = step
        cp.counters[name] = step
        cp.messages.append({"role": "user", "content": f"step {step}"})
        store.save(cp)
    assert name in store.load("r").counters
    secrets.add("BUDGET", name)
    cp.step = 3
    store.save(cp)
    loaded = store.load("r")
    assert name not in json.dumps(loaded.counters)
    assert loaded.scrub_report.by_rule() == {"secret:BUDGET": 1}


def test_a_counter_name_holding_a_token_is_never_proven() -> None:
    token = FAKES["github-token"](Random(3))[0]
    scrubber = Scrubber()
    counters = {token: 1}
    for _ in range(3):
        found = Found("reference", "state")
        _, _, stored = scrubber.scrub_fields({}, {}, counters, found, checked=False)
        assert token not in json.dumps(stored)
        assert found.counts
        assert scrubber.header_needs_walk(codec.encode(({}, counters)), counters)


class _Upper:
    """A user's step with its own look: it replaces "PLUGH" and says so from the text."""

    def might_match(self, text: str) -> bool:
        return "PLUGH" in text

    def __call__(self, text: str, found: Any) -> Any:
        if "PLUGH" not in text:
            return text
        found.add("plugh")
        return text.replace("PLUGH", "[REDACTED:plugh]")


def test_a_user_step_is_asked_through_its_own_look_and_one_without_makes_every_value_walk() -> None:
    with_look = Scrubber(steps=[_Upper()])
    assert not with_look.needs_walk_encoded(codec.encode({"content": "nothing here"}))
    assert with_look.needs_walk_encoded(codec.encode({"content": "a PLUGH b"}))
    scrubbed, found = with_look.scrub({"content": "a PLUGH b"}, "state")
    assert scrubbed == {"content": "a [REDACTED:plugh] b"}
    assert found.counts
    without_look = Scrubber(steps=[lambda text, found: text])
    assert without_look.needs_walk_encoded(codec.encode({"content": "nothing here"}))


def test_with_a_user_step_counter_names_are_looked_at_on_every_save() -> None:
    """A user's step need not be deterministic: no counter names are remembered for it."""
    scrubber = Scrubber(steps=[_Upper()])
    counters = {"tokens_in": 1}
    for _ in range(2):
        found = Found("reference", "state")
        scrubber.scrub_fields({}, {}, counters, found, checked=True)
        assert scrubber.header_needs_walk(codec.encode(({}, counters)), counters)
