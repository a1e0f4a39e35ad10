"""What the call journal keeps of a result, on every backend, sync and ``AsyncStore``: hostile
keys and values exactly as given (quotes, unicode, 1024-character keys; ``$``-keys, dicts
shaped like the store's own references, NUL, large text and ``bytes`` through the blob
target), scrubbed as a checkpoint value is — a registered secret stored as a reference that
``resolve_secrets`` gives back, a token rule's match redacted and counted in
``Recorded.redacted`` — and refused under the ``raise`` policy, naming where, never what.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from journal_stores import VARIANTS, Backend, backends, quoted, started
from safepoint import InvalidArgument, SecretLeak, Secrets
from safepoint.refs import ScrubbedText, SecretRef

TOKEN = "sk-proj-Zq81mXc0PfLw2RkT9vYbH4nJ6tGd3sQe"  # matched by the scrubber's token rules
SECRET = "zq-Registered-Secret-4411"
THRESHOLD = 64  # values over this many bytes go to the blob target


@pytest.fixture(params=VARIANTS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backends(request.param, tmp_path)


HOSTILE_KEYS = (
    'it\'s "quoted" `twice`',
    "'; DROP TABLE safepoint_calls; --",
    "%_\\ like a pattern",
    "é💥\u202e\u2028 unicode",
    "k" * 1024,
    "é" * 1024,  # 1024 characters, 2048 bytes
    "call:k",
    "thread/ns|3|agent,tools:0|#2",
    " ",
)
HOSTILE_RESULTS: tuple[Any, ...] = (
    {"$secret": "TOKEN"},  # shaped like the store's own references: plain data here
    {"$blob": {"sha256": "0" * 64, "size": 3, "media_type": "text/plain"}},
    {"$marks": [[0, 1]], "$text": "x"},
    {"$$secret": "x", "$": "$", "$$": {"$k": ["$v"]}},
    {"nul": "a\x00b", "\x00key": "\x00"},
    "[SECRET:TOKEN] [REDACTED:email] plain text shaped like markers",
    "a\x00b" * 100,  # large, with NULs: to the blob target
    b"\x00\xff raw bytes " * 20,  # bytes: to the blob target
    {"nested": [b"\x00bytes", {"deep": ["x" * 200, -(2**63), 2**63 - 1, 1.5e-300]}]},
    ["é💥\u202e", "\\", '"', "\n\r\t", "<script>alert(1)</script>"],
    [],
    {},
    0,
    False,
    "",
)


def test_hostile_keys_and_results_come_back_exactly(backend: Backend) -> None:
    store = backend.open(blob_threshold=THRESHOLD)
    started(store, "run 'é' $x")  # a hostile run id too
    expected: dict[str, Any] = {}
    for n, key in enumerate(HOSTILE_KEYS):
        result = HOSTILE_RESULTS[n % len(HOSTILE_RESULTS)]
        entry = store.record_call("run 'é' $x", key, result)
        assert (entry.key, entry.result, entry.written) == (key, result, True)
        expected[key] = result
    for n, result in enumerate(HOSTILE_RESULTS):
        key = f"result-{n}"
        assert store.record_call("run 'é' $x", key, result).result == result
        assert store.call_intent("run 'é' $x", key).result == result  # read back by the write
        expected[key] = result
    reopened = backend.open(blob_threshold=THRESHOLD)  # a fresh handle reads them as stored
    for key, result in expected.items():
        found = reopened.recorded_call("run 'é' $x", key)
        assert found is not None, key[:40]
        assert (found.key, found.result) == (key, result)
        assert type(found.result) is type(result)
    listed = {entry.key: entry.result for entry in reopened.recorded_calls("run 'é' $x")}
    assert listed == expected
    # Keys differing by one character, or by case, are different entries.
    assert reopened.recorded_call("run 'é' $x", "k" * 1023) is None
    assert reopened.recorded_call("run 'é' $x", "CALL:K") is None


def test_large_results_go_to_the_blob_target(backend: Backend) -> None:
    store = backend.open(blob_threshold=THRESHOLD)
    started(store, "run")
    big = {"text": "long " * 100, "data": bytes(range(256)) * 4}
    assert store.record_call("run", "big", big).result == big
    ((blobs, result),) = backend.raw("SELECT blobs, result FROM safepoint_calls")
    assert blobs is not None  # the row names the blobs it references, for gc
    assert b"long long" not in bytes(result)  # the text went to the blob target


def test_a_registered_secret_is_stored_as_a_reference(backend: Backend) -> None:
    store = backend.open(secrets=Secrets({"API_KEY": SECRET}))
    started(store, "run")
    result = {"auth": f"Bearer {SECRET}", "exact": SECRET, "list": [SECRET]}
    entry = store.record_call("run", "tool", result)
    assert entry.redacted == 0  # a reference is given back on request: not redacted
    assert entry.result["exact"] == SecretRef("API_KEY")
    assert str(entry.result["auth"]) == "Bearer [SECRET:API_KEY]"
    resolved = store.recorded_call("run", "tool", resolve_secrets=True)
    assert resolved is not None
    assert resolved.result == result
    assert [e.result for e in store.recorded_calls("run", resolve_secrets=True)] == [result]
    rotated = store.recorded_call("run", "tool", resolve_secrets=Secrets({"API_KEY": "rotated-value"}))
    assert rotated is not None
    assert rotated.result["exact"] == "rotated-value"  # resolved as load resolves them
    cells = backend.raw("SELECT result FROM safepoint_calls")
    assert not any(SECRET.encode() in bytes(cell) for (cell,) in cells)
    plain = backend.open(scrubber=False) if backend.kind != "memory" else None
    if plain is not None:  # a store without the secrets cannot resolve the reference
        with pytest.raises(InvalidArgument):
            plain.recorded_call("run", "tool", resolve_secrets=True)


def test_a_token_rule_match_is_redacted_and_counted(backend: Backend) -> None:
    store = backend.open()
    started(store, "run")
    entry = store.record_call("run", "model", {"text": f"the key is {TOKEN}", "again": TOKEN, "n": 1})
    assert entry.redacted == 2
    assert isinstance(entry.result["again"], ScrubbedText)
    assert TOKEN not in str(entry.result)
    found = store.recorded_call("run", "model", resolve_secrets=False)
    assert found is not None
    assert (found.redacted, found.result) == (2, entry.result)
    assert store.record_call("run", "clean", {"text": "nothing here"}).redacted == 0


def test_a_registered_secret_under_the_redact_policy_counts_as_redacted(backend: Backend) -> None:
    """Under ``secret_policy="redact"`` the secret's marker is all that is stored: the result
    replays redacted, so it is counted (the integration counts a divergence)."""
    store = backend.open(secrets=Secrets({"API_KEY": SECRET}), secret_policy="redact")
    started(store, "run")
    entry = store.record_call("run", "tool", {"auth": SECRET})
    assert entry.redacted == 1
    assert SECRET not in str(store.recorded_call("run", "tool", resolve_secrets=True))


def test_the_raise_policy_refuses_a_secret_naming_the_result(backend: Backend) -> None:
    store = backend.open(secrets=Secrets({"API_KEY": SECRET}), secret_policy="raise")
    started(store, "run")
    with pytest.raises(SecretLeak) as caught:
        store.record_call("run", "tool", {"auth": [SECRET]})
    assert caught.value.path == "result.auth[0]"
    assert quoted(caught.value, [SECRET]) == []
    assert store.recorded_call("run", "tool") is None
