"""The store a command works on: its options (``store_options``) and how it is opened
(``open_store_at``/``open_existing``).

``--store`` (env ``SAFEPOINT_STORE``), ``--schema`` (PostgreSQL), ``--tenant`` (whose
runs: env ``SAFEPOINT_TENANT``; also taken before the command, ``safepoint --tenant NAME
runs``), ``--blobs`` (a blob store URL, env ``SAFEPOINT_BLOBS``: where the store's large
values live when not in its default place), ``--key-file``
(an encrypted store's keyring; env ``SAFEPOINT_KEY_FILE``, or the keys
themselves in ``SAFEPOINT_KEYS``) and ``--json`` are shared by every command
that opens a store; ``--schema``, ``--tenant``, ``--blobs`` and ``--key-file`` wait on
the click context and reach the store through ``open_store_at``, so every command
honours them.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import click

from safepoint import Keyring, retrying
from safepoint.errors import InvalidArgument, StoreError
from safepoint.store import DEFAULT_URL, SnapshotWarning, Store, open_store
from safepoint.store.admin import scheme_of, split_schema
from safepoint.visible import visible

F = TypeVar("F", bound=Callable[..., Any])


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
    func = tenant_option(func)
    func = click.option(
        "--blobs",
        default=None,
        metavar="URL",
        expose_value=False,
        callback=_remember_blobs,
        help="The store's blob store URL when not its default (s3://bucket/prefix; env SAFEPOINT_BLOBS).",
    )(func)
    func = click.option(
        "--key-file",
        default=None,
        metavar="PATH",
        expose_value=False,
        callback=_remember_key_file,
        help="Keyring of an encrypted store (env SAFEPOINT_KEY_FILE; or the keys in env SAFEPOINT_KEYS).",
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


def tenant_option(func: F) -> F:
    """``--tenant NAME``: on every command that opens a store, and on the ``safepoint`` group
    itself (``safepoint --tenant acme runs``); the command's own, when given, wins."""
    return click.option(
        "--tenant",
        default=None,
        metavar="NAME",
        expose_value=False,
        callback=_remember_tenant,
        help="Whose runs: the store's tenant (env SAFEPOINT_TENANT; default: the implicit one).",
    )(func)


_TENANT = "safepoint.tenant"  # where --tenant waits on the click context for open_store_at
TENANT_ENV = "SAFEPOINT_TENANT"


def _remember_tenant(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None:  # not given here: the group's --tenant, if any, still holds (ctx.meta is shared)
        ctx.meta[_TENANT] = value
    return value


_BLOBS = "safepoint.blobs"  # where --blobs waits on the click context for open_store_at


def _remember_blobs(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    ctx.meta[_BLOBS] = value
    return value


_KEY_FILE = "safepoint.key_file"  # where --key-file waits on the click context for open_store_at
KEYS_ENV, KEY_FILE_ENV = "SAFEPOINT_KEYS", "SAFEPOINT_KEY_FILE"


def _remember_key_file(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    ctx.meta[_KEY_FILE] = value
    return value


def given_store_options(shown_url: str) -> list[str]:
    """``--store``, ``--schema``, ``--tenant`` and ``--key-file`` as the command line gave them, for
    a command to repeat (``runs``' next-page hint); the store as ``shown_url`` (a PostgreSQL
    password masked). What came from the environment is left out: it still holds for the next
    command."""
    ctx = click.get_current_context()
    given = []
    if ctx.get_parameter_source("store_url") is click.core.ParameterSource.COMMANDLINE:
        given.append(f"--store={shown_url}")
    schema, key_file = ctx.meta.get(_SCHEMA), ctx.meta.get(_KEY_FILE)
    if schema is not None:
        given.append(f"--schema={schema}")
    tenant = ctx.meta.get(_TENANT)
    if tenant is not None:  # a name open_store accepted: letters, digits, - and _ only
        given.append(f"--tenant={tenant}")
    if key_file is not None:
        given.append(f"--key-file={key_file}")
    return given


def given_keyring() -> Keyring | None:
    """The keyring the command line gives: ``--key-file``, else ``SAFEPOINT_KEY_FILE``, else
    ``SAFEPOINT_KEYS`` (the keys themselves); None when none is given."""
    path = click.get_current_context().meta.get(_KEY_FILE) or os.environ.get(KEY_FILE_ENV)
    if path:
        return Keyring.from_file(path)
    if os.environ.get(KEYS_ENV):
        return Keyring.from_env(KEYS_ENV)
    return None


def place_options(store_url: str) -> dict[str, Any]:
    """Where the store's data is, as the command line and environment say: ``--schema`` (else
    ``?schema=`` in the URL, else ``SAFEPOINT_SCHEMA``) and ``--blobs`` (else ``SAFEPOINT_BLOBS``)."""
    options: dict[str, Any] = {}
    postgres = scheme_of(store_url) == "postgresql"
    chosen = click.get_current_context().meta.get(_SCHEMA)
    if chosen is not None and not postgres:
        raise InvalidArgument("--schema applies to PostgreSQL stores only")
    if chosen is None and postgres and split_schema(store_url)[1] is None:
        chosen = os.environ.get("SAFEPOINT_SCHEMA") or None
    if chosen is not None:
        options["schema"] = chosen
    blobs = click.get_current_context().meta.get(_BLOBS) or os.environ.get("SAFEPOINT_BLOBS")
    if blobs:
        options["blobs"] = blobs
    return options


def open_store_at(store_url: str, *, read_only: bool = False, **options: Any) -> Store:
    """The store a command works on: read-only for the commands that only look (they never create one).

    Read-only, each of its calls is retried while the store is unavailable
    (``safepoint.retrying.reading``): a dropped connection, or a query a hot
    standby cancelled for a conflict with recovery, is asked again.

    The PostgreSQL schema is ``--schema``, else ``?schema=`` in the URL, else
    ``SAFEPOINT_SCHEMA``. The tenant is ``--tenant`` (the command's, else the
    group's), else ``SAFEPOINT_TENANT``, else the implicit one; a bad name is
    ``InvalidURL`` (exit 2, the name never quoted). A SQLite file read as an
    immutable snapshot (no write access to its folder) is said on stderr.
    """
    options = {**place_options(store_url), **options}
    tenant = click.get_current_context().meta.get(_TENANT)
    if tenant is None:
        tenant = os.environ.get(TENANT_ENV) or None  # set but empty: not set, as SAFEPOINT_SCHEMA
    if tenant is not None and "tenant" not in options:
        options["tenant"] = tenant
    if "encryption" not in options:
        keyring = given_keyring()
        if keyring is not None:
            options["encryption"] = keyring
    elif options["encryption"] is None:  # the command opens the store plain (safepoint encrypt)
        del options["encryption"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SnapshotWarning)
        store = open_store(store_url, read_only=read_only, **options)
    for warning in caught:
        if issubclass(warning.category, SnapshotWarning):
            click.echo(f"note: {visible(str(warning.message))}", err=True)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return retrying.reading(store) if read_only else store


def open_existing(store_url: str, **options: Any) -> Store:
    """The store, for writing, only if one is there: a command that changes an existing store must
    not create one where there is none (``StoreNotFound``, exit code 3, and nothing made)."""
    # StoreError: a store is there (an older one, which opening it for writing upgrades), or
    # the store cannot be reached, which the open below says.
    with contextlib.suppress(StoreError):
        open_store_at(store_url, read_only=True, **options).close()
    return open_store_at(store_url, **options)
