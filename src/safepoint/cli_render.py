"""How the CLI shows what it read: JSON for machines, tables for people, stored text only ever as text.

Everything a store holds may have been written by an attacker (a web page or
a tool's output in a message, a run id chosen by whoever started the run).
Two things keep it from acting on the operator's terminal:

* control and format characters are shown as escapes (:func:`safepoint.visible.visible`),
  in tables and in JSON alike (:func:`safepoint.visible.visible_json`);
* nothing read from a store is parsed as rich markup or emoji codes: the
  console has markup, highlighting and emoji switched off, and every piece
  of stored text reaches rich as a ``Text`` object, so ``[link=…]``,
  ``[bold]`` or ``:thumbs_up:`` in a message print as those characters.

The commands build their output only through these helpers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from safepoint.visible import ID_LEN, visible, visible_json

__all__ = ["ID_LEN", "cell", "console", "emit", "error_line", "json_text", "pairs", "say", "shown", "when"]

# markup/emoji off: a string that reaches rich by mistake still prints as itself.
console = Console(markup=False, highlight=False, emoji=False)


def emit(data: Any, as_json: bool, render: Callable[[], None]) -> None:
    """The one output path: JSON when asked, otherwise the human rendering."""
    if as_json:
        click.echo(json_text(data))
    else:
        render()


def json_text(data: Any) -> str:
    """``data`` as indented JSON in which no control or format character is written raw.

    Store-written references (``SecretRef``, ``BlobLink``, ``ScrubbedText``)
    are dict and str subclasses, so they come out as the JSON they equal.
    """
    return visible_json(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def shown(value: Any, *, max_len: int | None = None) -> str:
    """One stored value as one line of visible text: a string as itself, anything else as JSON."""
    if isinstance(value, str):
        return visible(value, max_len=max_len)
    # default=str: a datetime or another non-JSON value still shows, as its str.
    return visible(json.dumps(value, ensure_ascii=False, default=str), max_len=max_len)


def cell(value: Any, *, max_len: int | None = None) -> Text:
    """A table cell (or title) for a stored value: visible text that rich never parses."""
    return Text(shown(value, max_len=max_len))


def say(line: str) -> None:
    """Print one line built from already visible pieces (``shown``/``visible``), never as markup."""
    console.print(Text(line))


def pairs(mapping: Mapping[str, Any], *, max_len: int | None = None) -> str:
    """``key=value, …`` of a stored mapping (labels, counters), each key and value visible."""
    text = ", ".join(f"{shown(k)}={shown(v)}" for k, v in mapping.items()) or "-"
    return text if max_len is None else visible(text, max_len=max_len)


def when(moment: datetime | None) -> str:
    return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")


def error_line(exc: BaseException) -> str:
    """The one line an error prints on stderr; its text can quote stored values, so it is made visible."""
    return f"error: {visible(str(exc))}"
