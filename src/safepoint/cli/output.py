"""What every command shares: its store options, how it opens the store, its errors and its output.

* ``store_options`` (``--store``, ``--schema``, ``--key-file``, ``--json``) and
  ``open_store_at``/``open_existing``: the store a command works on (``stores.py``,
  re-exported here).
* ``handle_errors``: a ``SafepointError`` prints one line on stderr (a JSON
  object with ``--json``) and exits with the status for its kind (``ExitCode``).
* ``emit`` and the helpers below it: JSON for machines, tables for people,
  stored text only ever as text.

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

import functools
import json
import re
import sys
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import IntEnum
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.text import Text

# Re-exported: every command imports what it shares from this one module.
from safepoint import codec
from safepoint.cli.stores import given_keyring, open_existing, open_store_at, place_options, store_options
from safepoint.errors import (
    BlobNotFound,
    Conflict,
    CorruptCheckpoint,
    InvalidArgument,
    LeaseLost,
    MissingKey,
    NotFound,
    RunStatusError,
    SafepointError,
    StoreCorrupt,
    StoreError,
)
from safepoint.readable import number
from safepoint.store import QueueState
from safepoint.visible import ID_LEN, visible, visible_json

__all__ = [
    "ID_LEN",
    "NARROW",
    "WIDE",
    "ExitCode",
    "cell",
    "console",
    "emit",
    "error_json",
    "error_line",
    "error_object",
    "exit_code",
    "given_keyring",
    "handle_errors",
    "holding",
    "json_text",
    "number",
    "numbers",
    "open_existing",
    "open_store_at",
    "pairs",
    "place_options",
    "report_error",
    "say",
    "shown",
    "store_options",
    "when",
]

F = TypeVar("F", bound=Callable[..., Any])

# How much of a stored value one table cell shows.
WIDE = 200
NARROW = 100

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


def numbers(mapping: Mapping[str, Any], *, max_len: int | None = None) -> str:
    """``key=value, …`` of counters, each value a ``number`` and each key visible."""
    text = ", ".join(f"{shown(k)}={number(v)}" for k, v in mapping.items()) or "-"
    return text if max_len is None else visible(text, max_len=max_len)


def holding(state: QueueState, now: datetime | None = None) -> str:
    """Who holds a run, in a few words: ``held by OWNER until …``, ``queued``, or ``not queued``.

    The owner is a worker's id or an exclusive ``Run``'s (``host:pid:…``),
    both leases. A lease past its expiry holds nothing: any worker may claim the run.
    """
    if state.owner is not None and state.leased(now):
        return f"held by {visible(state.owner, max_len=ID_LEN)} until {when(state.expires_at)}"
    return "queued" if state.queued else "not queued"


def error_line(exc: BaseException) -> str:
    """The one line an error prints on stderr; its text can quote stored values, so it is made visible."""
    return f"error: {visible(str(exc))}"


class ExitCode(IntEnum):
    """What the ``safepoint`` command's exit status says; documented in docs/cli.md.

    The codes stay as they are across releases: scripts branch on them.
    """

    OK = 0
    FAILURE = 1  # anything else: a failed verify, a migration that raised, a budget exceeded
    USAGE = 2  # a wrong argument or option (click's own usage errors exit 2 as well)
    NOT_FOUND = 3  # no such run or step, or no safepoint store at the URL
    CORRUPT = 4  # stored data failed verification (digest, blob hash, missing blob), or a damaged file
    UNAVAILABLE = 5  # the store could not be reached or failed: connection, lock timeout, disk full
    CONFLICT = 6  # the run moved on, is leased by a worker, or its status forbids the command


# Most specific first: BlobNotFound is a StoreError and a LookupError, but for a
# checkpoint that references it the stored data is damaged.
_EXIT_CODES: tuple[tuple[type[SafepointError], ExitCode], ...] = (
    (CorruptCheckpoint, ExitCode.CORRUPT),
    (BlobNotFound, ExitCode.CORRUPT),
    (StoreCorrupt, ExitCode.CORRUPT),
    (NotFound, ExitCode.NOT_FOUND),
    (InvalidArgument, ExitCode.USAGE),
    (MissingKey, ExitCode.USAGE),  # the command needs a key: --key-file or SAFEPOINT_KEYS
    (Conflict, ExitCode.CONFLICT),
    (LeaseLost, ExitCode.CONFLICT),
    (RunStatusError, ExitCode.CONFLICT),
    (StoreError, ExitCode.UNAVAILABLE),
)


def exit_code(exc: SafepointError) -> ExitCode:
    """The exit status for an error, by its kind (``ExitCode``)."""
    for kind, code in _EXIT_CODES:
        if isinstance(exc, kind):
            return code
    return ExitCode.FAILURE


def error_json(exc: SafepointError) -> str:
    """The error as one JSON object for machines (``--json``), on one line.

    ``error`` is the message (which never quotes a stored value, only ids,
    steps and names), ``type`` the class name, ``run_id`` and ``step`` where
    the error names them (else null); control characters come out escaped.
    """
    run_id, step = getattr(exc, "run_id", None), getattr(exc, "step", None)
    return error_object(str(exc), type(exc).__name__, run_id, step)


def error_object(message: str, kind: str, run_id: Any = None, step: Any = None) -> str:
    """``{"error": message, "type": kind, "run_id": …, "step": …}`` as one line of visible JSON."""
    data = {
        "error": message,
        "type": kind,
        "run_id": run_id if isinstance(run_id, str) else None,
        "step": step if type(step) is int else None,
    }
    return visible_json(json.dumps(data, ensure_ascii=False))


def report_error(exc: SafepointError, *, as_json: bool) -> ExitCode:
    """Print the error on stderr (one line; a JSON object with ``--json``) and return its exit code."""
    click.echo(error_json(exc) if as_json else error_line(exc), err=True)
    return exit_code(exc)


def handle_errors(func: F) -> F:
    """Every command's errors, in one place: a ``SafepointError`` prints one line on stderr
    (with ``--json``, a JSON object: ``error_json``) and exits with the status for its
    kind: ``ExitCode`` (usage 2, not found 3, corrupt 4, store unavailable 5, conflict
    or lease lost 6, anything else 1), documented in docs/cli.md."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except SafepointError as exc:
            sys.exit(report_error(exc, as_json=bool(kwargs.get("as_json"))))

    return wrapper  # type: ignore[return-value]


# A JSON string (its escapes included), skipped when measuring how deep a text nests.
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _nesting(text: str) -> int:
    """How many dicts and lists ``text`` opens inside one another (strings skipped)."""
    depth = deepest = 0
    for char in _JSON_STRING.sub("", text):
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def parse_json_option(text: str, option: str) -> Any:
    """The JSON value an option gave, or click's usage error naming the option (never the text)."""
    # Measured on the text first: a parser recurses once per level, so a value
    # thousands deep would end in a RecursionError, not in this line.
    if _nesting(text) > codec.MAX_DEPTH:
        raise click.BadParameter(
            f"nests deeper than {codec.MAX_DEPTH} dicts and lists (the store's bound)", param_hint=option
        )
    try:
        return json.loads(text)
    except ValueError:
        raise click.BadParameter("is not valid JSON", param_hint=option) from None
