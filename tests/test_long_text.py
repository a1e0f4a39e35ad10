"""Values with very long strings encode to orjson's exact bytes without its worst-case reservation.

orjson's bytes for a 10 MB string held a 133 MB allocation (issue 17's
100 MB save peaked at 12.6x its size). ``long_text`` splices long strings in
itself; these tests hold its bytes to orjson's, byte for byte, over hostile
text (quotes, backslashes, every control character, surrogate-free Unicode,
text shaped like its own placeholder), and measure the peak.
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import safepoint
from safepoint import Checkpoint, codec, long_text

# Text with everything JSON escapes, its placeholder's private-use character, and markup.
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40) | st.sampled_from(
    ['"', "\\", "\x00\x1f\x7f", "\ue000", "\ue000deadbeef:0", "</script>", "\u2028\u2029"]
)
VALUES = st.recursive(
    TEXT | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.none(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(TEXT, children, max_size=4),
    max_leaves=12,
)


@pytest.fixture
def short_long_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Strings past 8 characters count as long, so small examples take the splicing path."""
    monkeypatch.setattr(long_text, "LONG_STRING", 8)
    monkeypatch.setattr(long_text, "CHUNK", 3)


@settings(max_examples=300, deadline=None)
@given(value=VALUES, sort=st.booleans())
def test_the_bytes_are_orjsons(value: Any, sort: bool) -> None:
    """Whatever the value, dumps and the joined pieces are orjson.dumps's bytes (strings past 8
    characters spliced, in chunks of 3)."""
    option = orjson.OPT_SORT_KEYS if sort else 0
    expected = orjson.dumps(value, option=option)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(long_text, "LONG_STRING", 8)
        patch.setattr(long_text, "CHUNK", 3)
        assert long_text.dumps(value, option) == expected
        assert b"".join(long_text.pieces(value, option)) == expected


def test_a_long_string_goes_in_chunks(short_long_strings: None) -> None:
    """A long string is encoded chunk by chunk (3 characters here): no escaped copy of it whole."""
    value = {"b": ["plain text é", 'a "quoted\\" line\n'], "a": 1}
    parts = long_text.pieces(value, orjson.OPT_SORT_KEYS)
    assert b"".join(parts) == orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    at = parts.index(b"pla")
    assert parts[at : at + 4] == [b"pla", b"in ", b"tex", b"t \xc3\xa9"]
    assert max(map(len, parts[1:-1])) <= 12  # 3 escaped characters: at most 2 bytes each, or 6 for \u00XX


def test_encoding_a_long_string_peaks_near_its_size() -> None:
    """codec.encode of a 4 MB message: at most 2.5x its size above the caller's data (orjson alone: ~13x)."""
    text = "x" * 4_000_000
    message = {"role": "tool", "content": text}
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        body = codec.encode(message)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert body == orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
    assert peak <= 2.5 * len(text), f"peak {peak:,} B"


@pytest.mark.parametrize(
    ("head", "bound"),
    [
        ('</script>"\\\n\x00 ', 3.0),  # ASCII, with everything JSON escapes
        # One character past Latin-1: Python then holds all of the text at 2 bytes a
        # character, and its UTF-8 encoder reserves 3 bytes a character for the blob's bytes.
        ('\u202e</script>"\\\n', 4.5),
    ],
)
def test_saving_one_huge_message_peaks_near_its_size(tmp_path: Path, head: str, bound: float) -> None:
    """An 8 MB tool output with hostile text: its save peaks at ≤ 3x its size (ASCII); it loads back."""
    text = head + "y" * 8_000_000
    with safepoint.open_store(f"sqlite:///{tmp_path / 'big.db'}") as store:
        peak = save_peak(store, Checkpoint(run_id="big", messages=[{"role": "tool", "content": text}]))
        assert peak <= bound * len(text), f"peak {peak:,} B for {len(text):,} characters"
        assert store.load("big").messages[0]["content"] == text


def test_the_short_check_refuses_what_long_text_would_splice() -> None:
    """is_short_plain_json (the save's licence to encode with orjson alone) is is_plain_json
    that also refuses a string value past LONG_STRING, however deep; is_plain_json still accepts it."""
    long = "z" * (long_text.LONG_STRING + 1)
    edge = "z" * long_text.LONG_STRING
    for value in ({"content": long}, [long], {"a": [{"b": long}]}, long):
        assert codec.is_plain_json(value)
        assert not codec.is_short_plain_json(value)
        assert long_text.has_long_string(value)
    for value in ({"content": edge}, [edge, 1, None], {"a": [{"b": edge}]}, edge):
        assert codec.is_short_plain_json(value)
        assert not long_text.has_long_string(value)
    assert not codec.is_short_plain_json({"a": 2**64})  # still the plain-JSON check


@pytest.mark.parametrize("scrubber", [True, False])
def test_saving_a_huge_state_peaks_near_its_size(tmp_path: Path, scrubber: bool) -> None:
    """An 8 MB string in the header (state): validation does not prove the header short, so
    it is encoded without orjson's reservation on the way to the blob store; it loads back."""
    text = "</script>" + "s" * 8_000_000
    url = f"sqlite:///{tmp_path / 'big.db'}"
    with safepoint.open_store(url, **({} if scrubber else {"scrubber": False})) as store:
        peak = save_peak(store, Checkpoint(run_id="big", state={"output": text}))
        assert peak <= 4.0 * len(text), f"peak {peak:,} B for {len(text):,} characters"
        assert store.load("big").state == {"output": text}


def save_peak(store: safepoint.Store, cp: Checkpoint) -> int:
    """The bytes a save of ``cp`` allocated at its peak, above what was held before it."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        store.save(cp)
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
