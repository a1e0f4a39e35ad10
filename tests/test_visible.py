"""``safepoint.visible``: control and format characters shown as escapes, everything else as it is."""

from __future__ import annotations

import json
import logging
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

import safepoint
from safepoint import Checkpoint, Status
from safepoint.refs import ScrubbedText
from safepoint.visible import ID_LEN, visible, visible_json, visible_traceback
from safepoint.worker import Job, Worker

HIDDEN = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def hidden(text: str, *, allow: str = "") -> list[str]:
    return [c for c in text if c not in allow and unicodedata.category(c) in HIDDEN]


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # window title
        ("\x1b[2J\x1b[1;1H", "\\x1b[2J\\x1b[1;1H"),  # clear screen, cursor home
        ("a\nb\tc\rd", "a\\nb\\tc\\rd"),
        ("\x00\x7f\x85\x9b", "\\x00\\x7f\\x85\\x9b"),  # NUL, DEL, C1 NEL and CSI
        ("\u202egnp.exe\u202c", "\\u202egnp.exe\\u202c"),  # bidi override
        ("\u2066\u2067\u2068\u2069", "\\u2066\\u2067\\u2068\\u2069"),  # bidi isolates
        ("a\u200bb\u200dc\u200fd\ufeff\u00ad", "a\\u200bb\\u200dc\\u200fd\\ufeff\\xad"),  # zero-width
        ("x\u2028y\u2029", "x\\u2028y\\u2029"),  # line and paragraph separators
        ("tag\U000e0041", "tag\\U000e0041"),  # an invisible tag character
        ("lone \ud800", "lone \\ud800"),  # a surrogate would not even encode
    ],
)
def test_hidden_characters_become_escapes(raw: str, shown: str) -> None:
    """Cc, Cf, Zl/Zp and lone surrogates are written as Python-style escapes."""
    assert visible(raw) == shown


def test_ordinary_text_is_unchanged() -> None:
    """Any script, emoji, markup-shaped text, backslashes and non-breaking spaces print as themselves."""
    text = "héllo 中文 עברית 😀 [link=https://x]y[/link] C:\\path\\x1b \u00a0 \u3000"
    assert visible(text) == text


def test_a_str_subclass_renders_as_its_text() -> None:
    """A store-written ScrubbedText is shown as the text it is equal to."""
    text = ScrubbedText("key [SECRET:API_KEY|raw]\x1b", [(4, 24)])
    assert visible(text) == "key [SECRET:API_KEY|raw]\\x1b"
    assert type(visible(text)) is str


def test_keep_newlines_keeps_only_line_breaks() -> None:
    """A multi-line body keeps its line breaks, and nothing else."""
    assert visible("one\ntwo\r\n\x1b[2J", keep_newlines=True) == "one\ntwo\\r\n\\x1b[2J"


def test_max_len_cuts_between_escapes_and_marks_the_cut() -> None:
    """A capped result never exceeds max_len, never splits an escape, and ends with … when cut."""
    text = "ab\x1bcdef\x07"
    full = visible(text)
    for n in range(1, len(full) + 3):
        capped = visible(text, max_len=n)
        assert len(capped) <= n
        if n >= len(full):
            assert capped == full
        else:
            assert capped.endswith("…")
            assert full.startswith(capped[:-1])
            assert not capped[:-1].endswith(("\\", "\\x", "\\x1"))
    assert visible("abc", max_len=3) == "abc"
    assert visible("abcd", max_len=3) == "ab…"
    with pytest.raises(ValueError, match="max_len"):
        visible("x", max_len=0)


def test_a_capped_huge_value_is_only_read_as_far_as_it_is_shown() -> None:
    """A megabyte of escape sequences capped to an id's length gives an id-length line."""
    capped = visible("\x1b[2J" * 250_000, max_len=ID_LEN)
    assert ID_LEN - 8 < len(capped) <= ID_LEN
    assert capped.endswith("\\x1b[2J…")
    assert visible("\x1b" * 100_000) == "\\x1b" * 100_000


@given(st.text())
def test_visible_leaves_nothing_hidden(text: str) -> None:
    """Whatever the input, the result holds no control or format character."""
    assert hidden(visible(text)) == []
    assert hidden(visible(text, keep_newlines=True), allow="\n") == []


@given(st.recursive(st.text() | st.integers() | st.none(), lambda inner: st.lists(inner, max_size=3)))
def test_visible_json_is_equal_json_with_nothing_hidden(value: object) -> None:
    """JSON passed through visible_json parses to the same value and holds no raw control character."""
    text = visible_json(json.dumps(value, ensure_ascii=False, indent=2))
    assert json.loads(text) == value
    assert hidden(text, allow="\n") == []


def test_visible_traceback_is_a_traceback_with_escaped_messages() -> None:
    """Frames stay as Python prints them; each exception's text is one visible line, causes included."""

    def fail() -> None:
        try:
            raise KeyError("inner\x1b[2J")
        except KeyError as exc:
            raise ValueError("tool said\nERROR forged line\x07") from exc

    with pytest.raises(ValueError, match="tool said") as caught:
        fail()
    text = visible_traceback(caught.value)
    assert hidden(text, allow="\n") == []
    assert "KeyError: 'inner\\x1b[2J'" in text
    assert "ValueError: tool said\\nERROR forged line\\x07" in text
    assert "The above exception was the direct cause of the following exception:" in text
    assert 'raise ValueError("tool said' in text  # the source line of the frame
    assert not any(line.startswith("ERROR forged") for line in text.splitlines())


def test_worker_log_lines_show_a_hostile_run_id_escaped(caplog: pytest.LogCaptureFixture) -> None:
    """A worker logging a failed handler: run id and the handler's exception text are escaped in the log."""
    run_id = "run\x1b]0;pwned\x07\nERROR forged line\u202e"
    with safepoint.open_store("memory://") as store:
        store.save(Checkpoint(run_id=run_id))
        store.enqueue(run_id)

        def handler(job: Job) -> Status:
            raise RuntimeError(f"tool output: {job.checkpoint.run_id}")

        with caplog.at_level(logging.INFO, logger="safepoint.worker"):
            worker = Worker(store, handler, worker_id="w\x1b[2J", lease=30, max_attempts=1)
            handled = worker.run(stop_when_idle=True)
        assert handled == 1
        assert store.run(run_id).status is Status.FAILED
    shown = "run\\x1b]0;pwned\\x07\\nERROR forged line\\u202e"
    messages = [r.getMessage() for r in caplog.records]
    # One attempt allowed: the run is quarantined, and the line names the (escaped) error.
    assert messages == [f"run {shown} quarantined after 1 attempts: RuntimeError: tool output: {shown}"]
    formatted = logging.Formatter("%(levelname)s %(message)s").format(caplog.records[0])
    assert hidden(formatted, allow="\n") == []
    assert not any(line.startswith("ERROR forged") for line in formatted.splitlines())
    assert hidden(caplog.text, allow="\n") == []
