"""Keys, sealing and keyed digests for encryption at rest (issue 18's foundation, no store yet).

What these prove: a keyring is built only from what it is given, and its
errors never show key material; a sealed value opens only under its data
key and for its place (store, run, step, column), so a copy, a swap or a
flipped bit is refused; a data key opens only under the key that wrapped it,
for its store; plaintext is told from sealed data; keyed digests differ by
key and by purpose.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safepoint.crypto.keyed import keyed_digest, keyed_hasher, label_index
from safepoint.crypto.keyring import INDEX_ID, Keyring
from safepoint.crypto.sealing import (
    DataKey,
    Place,
    SealBroken,
    is_sealed,
    key_id_of,
    parts,
    unseal,
)
from safepoint.crypto.wrapping import unwrap, wrap
from safepoint.errors import InvalidKey, MissingKey

# Fixed keys: parametrized test ids hold them, and pytest-xdist's workers must collect the same ids.
KEY_A, KEY_B, INDEX = bytes(range(32)), bytes(range(32, 64)), bytes(range(64, 96))
PLACE = Place("store-1", "run/../x?#", 7, "header")
HOSTILE = "\u202e<script>alert(1)</script>\x00\n$ref"


def _b64(key: bytes) -> str:
    return base64.urlsafe_b64encode(key).decode().rstrip("=")


def _text(*pairs: tuple[str, bytes]) -> str:
    return " ".join(f"{key_id}:{_b64(key)}" for key_id, key in pairs)


def test_a_keyring_from_text_orders_its_keys_and_writes_with_the_last() -> None:
    """Entries by comma, space or newline, comments dropped; the last key id is the writing one."""
    ring = Keyring.from_text(
        f"# keys\n{INDEX_ID}:{_b64(INDEX)}, 2026-01:{_b64(KEY_A)}\n2026-06:{_b64(KEY_B)} # new"
    )
    assert ring.ids == ("2026-01", "2026-06")
    assert ring.writing_id == "2026-06"
    assert (ring.key("2026-01"), ring.key("2026-06"), ring.index_key) == (KEY_A, KEY_B, INDEX)
    assert _b64(KEY_A) not in repr(ring)


def test_from_env_and_from_file_read_only_what_they_are_pointed_at(tmp_path: Path) -> None:
    """from_env reads the one variable named (an explicit mapping here); from_file the one file."""
    text = _text((INDEX_ID, INDEX), ("k1", KEY_A))
    assert Keyring.from_env("SAFEPOINT_KEYS", {"SAFEPOINT_KEYS": text}).key("k1") == KEY_A
    path = tmp_path / "keys"
    path.write_text(text)
    path.chmod(0o600)
    assert Keyring.from_file(path).key("k1") == KEY_A
    with pytest.raises(InvalidKey, match="not set"):
        Keyring.from_env("SAFEPOINT_KEYS", {})


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (f"k1:{_b64(KEY_A)}", "no index key"),
        (f"{INDEX_ID}:{_b64(INDEX)}", "no key-encryption key"),
        (f"{INDEX_ID}:{_b64(INDEX)} k1:{_b64(KEY_A)[:-3]}", "not 32 bytes"),
        (f"{INDEX_ID}:{_b64(INDEX)} k1:{_b64(KEY_A)}!!", "not base64"),
        (f"{INDEX_ID}:{_b64(INDEX)} {_b64(KEY_A)}", "not <id>:<key>"),
        (f"{INDEX_ID}:{_b64(INDEX)} k1:{_b64(KEY_A)} k1:{_b64(KEY_B)}", "twice"),
        (f"{INDEX_ID}:{_b64(INDEX)} ../etc:{_b64(KEY_A)}", "key id must be"),
    ],
    ids=["no-index", "no-kek", "short-key", "not-base64", "no-id", "twice", "bad-id"],
)
def test_a_malformed_keyring_says_what_is_wrong_without_the_key(text: str, says: str) -> None:
    """Every malformed source is InvalidKey naming the problem; no key material in the message."""
    with pytest.raises(InvalidKey, match=says) as caught:
        Keyring.from_text(text)
    message = str(caught.value)
    for key in (KEY_A, KEY_B, INDEX):
        assert _b64(key)[:8] not in message


def test_a_key_file_that_is_not_a_key_file_is_refused(tmp_path: Path) -> None:
    """Missing, binary and oversized files: InvalidKey, without their content."""
    with pytest.raises(InvalidKey, match="cannot read"):
        Keyring.from_file(tmp_path / "absent")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe" + KEY_A)
    binary.chmod(0o600)
    with pytest.raises(InvalidKey, match="not UTF-8"):
        Keyring.from_file(binary)
    big = tmp_path / "big"
    big.write_bytes(b"#" * (2 << 20))
    big.chmod(0o600)
    with pytest.raises(InvalidKey, match="larger"):
        Keyring.from_file(big)


def test_a_callable_keyring_asks_once_per_key_and_only_for_its_ids() -> None:
    """from_callable fetches a key when first needed, once; an id it does not list is MissingKey."""
    asked: list[str] = []

    def fetch(key_id: str) -> bytes:
        asked.append(key_id)
        return {"old": KEY_A, "new": KEY_B}[key_id]

    ring = Keyring.from_callable(fetch, ["old", "new"], index_key=INDEX)
    assert ring.writing_id == "new"
    assert (ring.key("new"), ring.key("new"), ring.key("old")) == (KEY_B, KEY_B, KEY_A)
    assert asked == ["new", "old"]
    with pytest.raises(MissingKey, match="'other'"):
        ring.key("other")
    failing = Keyring.from_callable(lambda key_id: 1 / 0, ["k"], index_key=INDEX)  # type: ignore[arg-type,return-value]
    with pytest.raises(InvalidKey, match="callable failed"):
        failing.key("k")


def test_a_missing_key_names_the_id_needed_and_never_a_hostile_one() -> None:
    """MissingKey names a well-formed id; an id read from a tampered row is not echoed."""
    ring = Keyring({"k1": KEY_A}, index_key=INDEX)
    with pytest.raises(MissingKey) as caught:
        ring.key("k2")
    assert caught.value.key_id == "k2"
    with pytest.raises(MissingKey) as hostile:
        ring.key(HOSTILE)
    assert "script" not in str(hostile.value)


@settings(max_examples=200, deadline=None)
@given(plaintext=st.binary(max_size=300), run_id=st.text(max_size=20), step=st.integers(0, 2**31 - 1))
def test_a_sealed_value_opens_for_its_place_and_nowhere_else(
    plaintext: bytes, run_id: str, step: int
) -> None:
    """Round trip for its place; another run, step, column or store refuses it."""
    key = DataKey.new("d1")
    place = Place("store-1", run_id, step, "messages")
    sealed = key.seal(plaintext, place)
    assert is_sealed(sealed)
    assert key_id_of(sealed) == "d1"
    if len(plaintext) >= 16:  # shorter text could turn up in random bytes by chance
        assert plaintext not in sealed
    assert key.unseal(sealed, place) == plaintext
    for other in (
        Place("store-1", run_id + "x", step, "messages"),
        Place("store-1", run_id, step + 1, "messages"),
        Place("store-1", run_id, step, "header"),
        Place("store-2", run_id, step, "messages"),
    ):
        with pytest.raises(SealBroken):
            key.unseal(sealed, other)


def test_a_keyed_hasher_gives_keyed_digests_bytes_and_keeps_nothing_between_calls() -> None:
    """``keyed_hasher`` is ``keyed_digest`` for one key and purpose: the same bytes, call after call."""
    hasher = keyed_hasher(INDEX, b"checkpoint digest")
    for data in (b"", b"a", HOSTILE.encode(), os.urandom(200), b"a"):
        assert hasher(data) == keyed_digest(INDEX, b"checkpoint digest", data)
    assert hasher(b"a") != keyed_hasher(KEY_A, b"checkpoint digest")(b"a")
    assert hasher(b"a") != keyed_hasher(INDEX, b"label")(b"a")


def test_values_sealed_together_each_get_a_fresh_nonce_and_open_only_for_their_own_place() -> None:
    """A save's columns sealed in one call (``seal_each``): each opens for its place as ``seal``'s
    does, under a nonce no other value got, and not for a neighbour's place."""
    key = DataKey.new("d1")
    places = [Place("store-1", "run-1", 3, column) for column in ("header", "messages", "chains")]
    values = [HOSTILE.encode(), b'{"role":"user"}' * 500, b""]
    sealed = [
        *key.seal_each([(v, p.associated_data()) for v, p in zip(values, places, strict=True)]),
        *key.seal_each([(v, p.associated_data()) for v, p in zip(values, places, strict=True)]),
    ]
    nonces = {bytes(parts(one)[1]) for one in sealed}
    assert len(nonces) == len(sealed)  # six values, six nonces: none reused
    for index, one in enumerate(sealed):
        value, place = values[index % 3], places[index % 3]
        assert key.unseal(one, place) == value
        with pytest.raises(SealBroken):
            key.unseal(one, places[(index + 1) % 3])
        with pytest.raises(SealBroken):
            key.unseal(one, Place("store-1", "run-1", 4, place.column))


def test_a_flipped_bit_a_cut_or_another_key_is_refused() -> None:
    """Any change to the sealed bytes, a truncation, or the wrong data key: SealBroken."""
    key = DataKey.new("d1")
    sealed = key.seal(HOSTILE.encode(), PLACE)
    for index in range(len(sealed)):
        altered = bytearray(sealed)
        altered[index] ^= 0x01
        with pytest.raises((SealBroken, MissingKey)):
            unseal(_only(key), bytes(altered), PLACE)
    with pytest.raises(SealBroken):
        key.unseal(sealed[:-1], PLACE)
    with pytest.raises(SealBroken):
        DataKey("d1", os.urandom(32)).unseal(sealed, PLACE)
    with pytest.raises(SealBroken):
        DataKey.new("d2").unseal(sealed, PLACE)


def _only(key: DataKey) -> Callable[[str], DataKey]:
    def find(key_id: str) -> DataKey:
        if key_id != key.key_id:
            raise MissingKey(key_id)
        return key

    return find


def test_plaintext_is_never_taken_for_sealed_data() -> None:
    """JSON and text a store writes do not begin like a sealed value."""
    for plain in (b'{"role":"user"}', b"[1,2]", b'"x"', HOSTILE.encode(), b""):
        assert not is_sealed(plain)
        with pytest.raises(SealBroken, match="not sealed"):
            key_id_of(plain)


def test_a_data_key_unwraps_only_under_its_key_and_for_its_store() -> None:
    """wrap uses the writing key; unwrap needs that key, the same store and the same data key id."""
    ring = Keyring({"old": KEY_A, "new": KEY_B}, index_key=INDEX)
    data_key = DataKey.new("d7")
    kek_id, wrapped = wrap(ring, data_key, "store-1")
    assert kek_id == "new"
    assert data_key.key not in wrapped
    assert unwrap(ring, kek_id, wrapped, "store-1", "d7").key == data_key.key
    with pytest.raises(SealBroken):
        unwrap(ring, kek_id, wrapped, "store-2", "d7")
    with pytest.raises(SealBroken):
        unwrap(ring, kek_id, wrapped, "store-1", "d8")
    with pytest.raises(SealBroken):
        unwrap(ring, "old", wrapped, "store-1", "d7")
    with pytest.raises(MissingKey, match="'gone'"):
        unwrap(ring, "gone", wrapped, "store-1", "d7")


def test_keyed_digests_differ_by_key_and_by_purpose() -> None:
    """The same low-entropy value digests differently under another index key or for another use."""
    assert keyed_digest(INDEX, b"message", b"yes") != keyed_digest(os.urandom(32), b"message", b"yes")
    assert keyed_digest(INDEX, b"message", b"yes") != keyed_digest(INDEX, b"blob", b"yes")
    assert label_index(INDEX, "tenant", "acme") == label_index(INDEX, "tenant", "acme")
    assert label_index(INDEX, "ten", "antacme") != label_index(INDEX, "tenant", "acme")
    assert "acme" not in label_index(INDEX, "tenant", "acme")
