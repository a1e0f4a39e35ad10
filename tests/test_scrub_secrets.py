"""Registered secrets: found in every encoding, stored as references, restored only on request."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import safepoint
from safepoint import Checkpoint, SecretLeak, UnknownSecret, codec
from safepoint.refs import SecretRef
from safepoint.scrub import Found, Scrubber, Secrets
from safepoint.scrub.automata import find_known
from safepoint.store.references import from_stored

KEY = "sk-live-Zq81mXc0PfLw2RkT9vYb"
PASSWORD = 'pa"ss\\word/with+plus&=%'


def encodings(value: str) -> dict[str, str]:
    """How a harness might write a secret into text."""
    raw = value.encode()
    return {
        "raw": value,
        "json": json.dumps(value)[1:-1],
        "json-twice": json.dumps(json.dumps(value))[1:-1],
        "url": quote(value, safe=""),
        "url-plus": quote_plus(value),
        "base64": base64.b64encode(raw).decode(),
        "base64-nopad": base64.b64encode(raw).decode().rstrip("="),
        "base64url": base64.urlsafe_b64encode(raw).decode(),
        "basic-auth": "Basic " + base64.b64encode(b"svc-user:" + raw).decode(),
        "bearer": "Authorization: Bearer " + value,
    }


def registry() -> Secrets:
    return Secrets().add("API_KEY", KEY).add("DB_PASSWORD", PASSWORD)


def scrubber(policy: str = "reference") -> Scrubber:
    return Scrubber(secrets=registry(), policy=policy, rules=False)


def leaks(text: str, value: str) -> list[str]:
    """Which encodings of ``value`` still appear in ``text``."""
    return [name for name, enc in encodings(value).items() if enc.split(" ")[-1] in text]


@pytest.mark.parametrize("value", [KEY, PASSWORD])
@pytest.mark.parametrize("encoding", list(encodings(KEY)))
def test_every_encoding_inside_text_is_replaced(value: str, encoding: str) -> None:
    """A registered value written in any encoding, inside prose, leaves no trace."""
    text = f"before {encodings(value)[encoding]} after"
    cleaned, found = scrubber().scrub({"t": text}, "state")
    assert leaks(json.dumps(cleaned), value) == []
    assert found.counts


def test_whole_string_becomes_a_reference_and_text_a_marker() -> None:
    """A string that is the secret becomes {"$secret": NAME}; inside text, [SECRET:NAME]
    at a recorded span (stored as scrubbed text: only that span is a marker)."""
    cleaned, _ = scrubber().scrub({"key": KEY, "line": f"use {KEY} now"}, "state")
    line = {"$marks": [[4, 20]], "$text": "use [SECRET:API_KEY] now"}
    assert cleaned == {"key": {"$secret": "API_KEY"}, "line": line}
    assert from_stored(cleaned) == {"key": SecretRef("API_KEY"), "line": "use [SECRET:API_KEY] now"}


def test_structure_is_kept_and_clean_values_are_untouched() -> None:
    """Lists stay lists, numbers stay numbers; a value with no secret is returned as is."""
    value = {"a": [1, 2.5, None, True, {"b": "plain"}], "c": "plain text"}
    cleaned, found = scrubber().scrub(value, "state")
    assert cleaned is value
    assert not found.counts


def test_scrubbing_is_idempotent_and_deterministic() -> None:
    """Scrubbing scrubbed data (as a load gives it back) changes nothing; two scrubbers agree."""
    value = {k: f"x {v} y" for k, v in encodings(KEY).items()} | {"whole": KEY}
    once, _ = scrubber().scrub(value, "state")
    twice, found = scrubber().scrub(from_stored(once), "state")
    assert twice == once
    assert not found.counts
    assert scrubber().scrub(value, "state")[0] == once


def test_redact_policy_leaves_no_reference() -> None:
    """Under "redact", secrets become [REDACTED:NAME] for good."""
    cleaned, _ = scrubber("redact").scrub({"key": KEY, "line": f"use {KEY}"}, "state")
    assert from_stored(cleaned) == {"key": "[REDACTED:API_KEY]", "line": "use [REDACTED:API_KEY]"}
    assert "$secret" not in json.dumps(cleaned)


def test_raise_policy_names_path_and_secret_never_value() -> None:
    """Under "raise", SecretLeak names the field path and the secret's name, not its value."""
    with pytest.raises(SecretLeak) as caught:
        scrubber("raise").scrub({"deep": [{"x": f"token {KEY}"}]}, "state")
    assert caught.value.path == "state.deep[0].x"
    assert caught.value.rule == "secret:API_KEY"
    assert KEY not in str(caught.value)


def test_secret_in_a_dict_key_is_replaced_in_the_key_and_the_path() -> None:
    """A dict key holding a secret becomes a marker, and the reported path shows the marker."""
    cleaned, found = scrubber().scrub({KEY: 1}, "state")
    assert cleaned == {"[SECRET:API_KEY]": 1}
    assert all(KEY not in path for _, path in found.counts)


def test_short_and_malformed_secrets_are_refused_at_registration() -> None:
    """Too short to find reliably, not a str, or a bad name: InvalidArgument, value not echoed."""
    with pytest.raises(safepoint.InvalidArgument, match="at least 8"):
        Secrets().add("X", "abc")
    with pytest.raises(safepoint.InvalidArgument):
        Secrets().add("bad name!", "abcdefghij")
    with pytest.raises(safepoint.InvalidArgument):
        Secrets().add("X", 12345678)  # type: ignore[arg-type]
    assert "abcdefgh" not in repr(Secrets().add("X", "abcdefgh"))


def test_env_and_callable_sources() -> None:
    """Secrets come from environment variable names and from a callable (a vault lookup)."""
    vault = {"v": "vault-value-0001"}
    secrets = Secrets().add_env("TOKEN_A", environ={"TOKEN_A": "env-value-00001"})
    secrets.add_source("VAULT", lambda: vault["v"])
    assert secrets.value("TOKEN_A") == "env-value-00001"
    vault["v"] = "vault-value-0002"
    secrets.refresh()
    assert secrets.value("VAULT") == "vault-value-0002"
    with pytest.raises(safepoint.InvalidArgument, match="MISSING"):
        Secrets().add_env("MISSING", environ={})


def test_round_trip_through_a_store_with_and_without_resolver() -> None:
    """Stored: references. Loaded with a resolver: the exact values. Without: references."""
    store = safepoint.open_store("memory://", secrets=registry())
    cp = Checkpoint(run_id="r")
    cp.messages.append({"role": "user", "content": f"key={KEY}"})
    cp.state = {"key": KEY, "pw_json": json.dumps({"pw": PASSWORD}), "b64": encodings(KEY)["base64"]}
    cp.pending_action = {"tool": "http", "headers": {"Authorization": f"Bearer {KEY}"}}
    cp.labels = {"owner": "me"}
    info = store.save(cp)
    assert info.scrub_report.by_rule() == {"secret:API_KEY": 4, "secret:DB_PASSWORD": 1}

    stored = store.load("r")
    assert stored.state["key"] == {"$secret": "API_KEY"}
    assert KEY not in json.dumps(stored.to_dict())
    assert stored.scrub_report == info.scrub_report

    resolved = store.load("r", resolve_secrets=True)
    assert resolved.messages == cp.messages
    assert resolved.state == cp.state
    assert resolved.pending_action == cp.pending_action

    vault = {"API_KEY": KEY, "DB_PASSWORD": PASSWORD}.get
    assert store.load("r", resolve_secrets=vault).state == cp.state
    with pytest.raises(UnknownSecret, match="API_KEY"):
        store.load("r", resolve_secrets=lambda name: None)


@pytest.mark.parametrize("padding", [0, 4000], ids=["small-header", "large-header"])
def test_every_header_field_is_scrubbed_whatever_the_header_size(padding: int) -> None:
    """A secret in any header field (value, key, label, counter name) is replaced, whether
    the header is small (walked at once) or large (each field looked at first)."""
    store = safepoint.open_store("memory://", secrets=registry())
    cp = Checkpoint(run_id="r")
    cp.counters = {"tokens_in": 12, f"cost_{KEY}": 1}
    cp.cursors = {"main": {"page": 3, "source": "crawler"}, "filler": "x" * padding}
    cp.state = {"plan": "subtask-1", "nested": [{"deep": f"key={KEY}"}], KEY: 1}
    cp.pending_action = {"tool": "http", "token": PASSWORD}
    cp.labels = {"owner": KEY}
    info = store.save(cp)
    stored = store.load("r")
    text = json.dumps(stored.to_dict())
    assert KEY not in text
    assert PASSWORD not in text
    assert stored.cursors == cp.cursors  # untouched fields are stored as they are
    assert info.scrub_report.by_rule() == {"secret:API_KEY": 4, "secret:DB_PASSWORD": 1}
    resolved = store.load("r", resolve_secrets=True)
    # Values come back; a dict key holds its marker as plain text (keys must stay
    # strings, so they cannot carry a reference) and is never resolved.
    assert resolved.state == {"plan": "subtask-1", "nested": [{"deep": f"key={KEY}"}], "[SECRET:API_KEY]": 1}
    assert resolved.pending_action == cp.pending_action


def test_large_message_is_scrubbed_and_a_clean_one_kept_as_is() -> None:
    """Messages over the look-first size are walked directly: a buried secret or token is
    still replaced, and a clean one keeps its exact bytes."""
    scrubber = Scrubber(secrets=registry())
    filler = "lorem ipsum dolor sit amet pwd " * 800  # ~25 KB, with a rule trigger in it
    dirty = {"role": "tool", "content": filler + f" Bearer {KEY} " + filler}
    clean = {"role": "tool", "content": filler}
    found = Found("reference", "messages")
    value, body = scrubber.scrub_encoded(dirty, codec.encode(dirty), "messages[0]", found)
    assert KEY not in body.decode()
    assert json.loads(body) == value
    assert found.counts
    encoded = codec.encode(clean)
    value, body = scrubber.scrub_encoded(clean, encoded, "messages[1]", Found("reference", "messages"))
    assert value is clean
    assert body is encoded


def test_resumed_resolved_checkpoint_saves_incrementally() -> None:
    """A checkpoint loaded with secrets resolved saves its next step writing only new messages."""
    store = safepoint.open_store("memory://", secrets=registry())
    cp = Checkpoint(run_id="r")
    cp.messages.extend({"role": "user", "content": f"{i} {KEY}"} for i in range(20))
    store.save(cp)
    resumed = store.load("r", resolve_secrets=True).next()
    resumed.messages.append({"role": "assistant", "content": "done"})
    info = store.save(resumed)
    assert info.message_count == 21
    assert [path for _, path, _ in info.scrub_report.counts] == []  # old messages were not re-scrubbed
    assert store.load("r").messages[:20] == store.load("r", 0).messages


def test_raise_policy_refuses_the_save_and_writes_nothing() -> None:
    """A store with secret_policy="raise" refuses the save; the run does not exist afterwards."""
    store = safepoint.open_store("memory://", secrets=registry(), secret_policy="raise")
    cp = Checkpoint(run_id="r", state={"k": f"x{KEY}"})
    with pytest.raises(SecretLeak, match=r"state\.k"):
        store.save(cp)
    with pytest.raises(safepoint.NotFound):
        store.load("r")


def test_bad_value_error_path_does_not_quote_a_secret_key() -> None:
    """A NotJSONCompatible error under a dict key that is a secret names the key's marker."""
    store = safepoint.open_store("memory://", secrets=registry())
    with pytest.raises(safepoint.NotJSONCompatible) as caught:
        store.save(Checkpoint(run_id="r", state={"ok": {KEY: {1, 2}}}))
    assert KEY not in str(caught.value)
    assert "SECRET:API_KEY" in str(caught.value)


planted = st.tuples(st.sampled_from([KEY, PASSWORD]), st.sampled_from(list(encodings(KEY))))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60), st.lists(planted, min_size=1, max_size=4), st.text(max_size=60))
def test_planted_secrets_in_random_text_are_always_removed(
    before: str, plants: list[tuple[str, str]], after: str
) -> None:
    """Random text with secrets planted in random encodings never keeps one."""
    text = before + " ".join(encodings(value)[enc] for value, enc in plants) + after
    cleaned, _ = scrubber().scrub({"t": text}, "state")
    out = json.dumps(cleaned)
    for value, _enc in plants:
        assert leaks(out, value) == []
    assert scrubber().scrub(from_stored(cleaned), "state")[0] == cleaned


def test_find_known_prefers_exact_encodings() -> None:
    """The full base64 of a secret is reported as base64 (restorable), not as a fragment."""
    hits = find_known(registry().automaton(), encodings(KEY)["base64"])
    assert [(h.name, h.encoding) for h in hits] == [("API_KEY", "base64")]
