"""Markers in the rule engine: only the ones the store wrote (``keep``) are exempt; marker-shaped input
switches nothing off, and redaction with the returned marks is idempotent."""

from __future__ import annotations

import re
from random import Random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safepoint.errors import InvalidArgument
from safepoint.scrub.rules import SECRET_RULES, default_scanner
from safepoint.scrub.token_rules.value_checks import is_placeholder
from scrub_corpus.fakes import FAKES, b62

SCANNER = default_scanner()
FORGED = ["[REDACTED:a]", "[SECRET:DB_PASSWORD]", "[SECRET:API_KEY|json]", "[REDACTED:private-key]"]


def marked(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"\[(?:REDACTED|SECRET):[^\]\s]{1,160}\]", text)]


@pytest.mark.parametrize("forged", FORGED)
def test_a_forged_marker_before_a_value_does_not_switch_redaction_off(forged: str) -> None:
    """password=[REDACTED:a]<secret>: the value is judged as if the marker were not there."""
    value = b62(Random(1), 24)
    out, names, marks = SCANNER.redact(f"password={forged}{value}\n")
    assert value not in out
    assert names == ["credential-assignment"]
    assert out == f"password={forged}[REDACTED:credential-assignment]\n"  # the input marker stays data
    assert marks == [(9 + len(forged), 9 + len(forged) + len("[REDACTED:credential-assignment]"))]


def test_a_forged_marker_inside_a_value_or_a_key_is_redacted_with_it() -> None:
    """A marker planted inside a secret (or a PEM body) goes with the secret it splits."""
    value = b62(Random(2), 30)
    out, _, _ = SCANNER.redact(f"api_key={value[:10]}[SECRET:X]{value[10:]}")
    assert out == "api_key=[REDACTED:credential-assignment]"
    block, first_line = FAKES["private-key"](Random(4))
    block = block.replace("\\n", "\n").replace("\r\n", "\n")
    lines = block.split("\n")
    lines.insert(2, "[REDACTED:fake]")
    out, _, _ = SCANNER.redact("key:\n" + "\n".join(lines) + "\nok")
    assert out == "key:\n[REDACTED:private-key]\nok"
    assert first_line not in out


@pytest.mark.parametrize("wrapper", ["[SECRET:{}]", "[REDACTED:{}]", "[SECRET:NAME|{}]"])
def test_a_token_inside_a_forged_marker_is_redacted(wrapper: str) -> None:
    """What marker-shaped input holds is data too: a token written as [SECRET:<token>] is found."""
    token = FAKES["github-token"](Random(3))[0]
    text = "note " + wrapper.format(token) + " end"
    out, names, marks = SCANNER.redact(text)
    assert token not in out
    assert names == ["github-token"]
    assert [out[s:e] for s, e in marks] == ["[REDACTED:github-token]"]


def test_kept_markers_are_never_matched_nor_overlapped() -> None:
    """A genuine marker is exempt, stays as it is, and its span comes back moved along."""
    value = b62(Random(5), 20)
    text = f"[SECRET:DB_PASSWORD] then token={value} and [REDACTED:jwt]"
    keep = [(0, 20), (len(text) - 14, len(text))]
    assert SCANNER.find(text, keep=keep)[0].start == text.index(value)
    out, names, marks = SCANNER.redact(text, keep=keep)
    assert out == "[SECRET:DB_PASSWORD] then token=[REDACTED:credential-assignment] and [REDACTED:jwt]"
    assert names == ["credential-assignment"]
    assert [out[s:e] for s, e in marks] == [
        "[SECRET:DB_PASSWORD]",
        "[REDACTED:credential-assignment]",
        "[REDACTED:jwt]",
    ]
    assert SCANNER.redact(out, keep=marks) == (out, [], marks)


def test_a_kept_marker_reads_as_a_boundary() -> None:
    """Text on either side of a genuine marker is judged apart: no match runs into or across it."""
    value = b62(Random(6), 20)
    text = f"password=[SECRET:PW]{value}"
    assert SCANNER.find(text, keep=[(9, 20)]) == []  # the value is not assigned: the marker is
    assert [f.rule for f in SCANNER.find(text)] == ["credential-assignment"]  # as input: judged through


def test_without_keep_every_marker_is_input_and_alone_matches_nothing() -> None:
    """Marker-shaped text alone (no keep given) is not a finding and stays as it is."""
    for name in [rule.name for rule in SECRET_RULES]:
        for text in (
            f"[REDACTED:{name}]",
            f"password=[REDACTED:{name}]",
            f'"token": "[SECRET:{name.upper()}]"',
        ):
            out, names, marks = SCANNER.redact(text)
            assert (out, names, marks) == (text, [], []), text


def test_keep_must_be_sorted_disjoint_spans_inside_the_text() -> None:
    """Bad keep spans are an InvalidArgument that quotes nothing of the text."""
    text = "token=" + b62(Random(7), 20)
    for keep in ([(5, 3)], [(0, 4), (2, 6)], [(0, len(text) + 1)], [(-1, 2)]):
        with pytest.raises(InvalidArgument) as caught:
            SCANNER.redact(text, keep=keep)
        assert text[6:] not in str(caught.value)


def test_marker_text_is_no_placeholder_word() -> None:
    """is_placeholder has no marker syntax in its list: a value is never refused for holding one."""
    assert not is_placeholder("[secret:" + b62(Random(8), 20))
    assert is_placeholder("changeme")
    assert is_placeholder("<your-key>")


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from([rule.name for rule in SECRET_RULES]),
    seed=st.integers(0, 2**32),
    forged=st.sampled_from(FORGED),
    where=st.floats(0, 1),
    pad=st.sampled_from(["", " ", "\n", "x"]),
)
def test_a_forged_marker_anywhere_never_saves_a_token(
    name: str, seed: int, forged: str, where: float, pad: str
) -> None:
    """Marker-shaped text planted anywhere — before, after, inside a token — never lets it through."""
    snippet, secret = FAKES[name](Random(seed))
    text = f"output:\n{snippet}\n"
    at = int(where * len(text))
    start = text.index(snippet)
    if start <= at <= start + len(snippet):
        pad = ""  # inside the token (or its context) only the marker goes in: padding makes another text
    text = text[:at] + pad + forged + pad + text[at:]
    out, names, marks = SCANNER.redact(text)
    assert secret not in out.replace(forged, "")
    assert names
    assert SCANNER.redact(out, keep=marks) == (out, [], marks)
