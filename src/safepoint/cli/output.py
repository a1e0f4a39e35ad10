"""What every command shares: its store options, how it opens the store, its errors and its output.

* ``store_options`` (``--store``, ``--schema``, ``--json``) and
  ``open_store_at``/``open_existing``: the store a command works on.
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

import contextlib
import functools
import json
import os
import sys
import warnings
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import IntEnum
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.text import Text

from safepoint.errors import (
    BlobNotFound,
    Conflict,
    CorruptCheckpoint,
    InvalidArgument,
    LeaseLost,
    NotFound,
    RunStatusError,
    SafepointError,
    StoreCorrupt,
    StoreError,
)
from safepoint.store import DEFAULT_URL, SnapshotWarning, Store, open_store
from safepoint.store.admin import scheme_of, split_schema
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
    "handle_errors",
    "json_text",
    "open_existing",
    "open_store_at",
    "pairs",
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


def store_options(func: F) -> F:
    """``--store``, ``--schema`` and ``--json``, shared by every command that opens a store.

    ``--schema`` reaches the store through ``open_store_at`` (it is kept on the
    click context, not passed to the command), so every command that opens
    its store with ``open_store_at`` honours it.
    """
    func = click.option(
        "--schema",
        default=None,
        metavar="NAME",
        expose_value=False,
        callback=_remember_schema,
        help="PostgreSQL schema of the store (beats ?schema= in the URL, then env SAFEPOINT_SCHEMA).",
    )(func)
    func = click.option(
        "--store",
        "store_url",
        envvar="SAFEPOINT_STORE",
        default=DEFAULT_URL,
        show_default=True,
        help="Store URL (env SAFEPOINT_STORE).",
    )(func)
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")(func)


_SCHEMA = "safepoint.schema"  # where --schema waits on the click context for open_store_at


def _remember_schema(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    ctx.meta[_SCHEMA] = value
    return value


def open_store_at(store_url: str, *, read_only: bool = False, **options: Any) -> Store:
    """The store a command works on: read-only for the commands that only look (they never create one).

    The PostgreSQL schema is ``--schema``, else ``?schema=`` in the URL, else
    ``SAFEPOINT_SCHEMA``. A SQLite file read as an immutable snapshot (no
    write access to its folder) is said on stderr.
    """
    postgres = scheme_of(store_url) == "postgresql"
    chosen = click.get_current_context().meta.get(_SCHEMA)
    if chosen is not None and not postgres:
        raise InvalidArgument("--schema applies to PostgreSQL stores only")
    if chosen is None and postgres and split_schema(store_url)[1] is None:
        chosen = os.environ.get("SAFEPOINT_SCHEMA") or None
    if chosen is not None:
        options["schema"] = chosen
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SnapshotWarning)
        store = open_store(store_url, read_only=read_only, **options)
    for warning in caught:
        if issubclass(warning.category, SnapshotWarning):
            click.echo(f"note: {visible(str(warning.message))}", err=True)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return store


def open_existing(store_url: str) -> Store:
    """The store, for writing, only if one is there: a command that changes an existing store must
    not create one where there is none (``StoreNotFound``, exit code 3, and nothing made)."""
    # StoreError: a store is there (an older one, which opening it for writing upgrades), or
    # the store cannot be reached, which the open below says.
    with contextlib.suppress(StoreError):
        open_store_at(store_url, read_only=True).close()
    return open_store_at(store_url)
