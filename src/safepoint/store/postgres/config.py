"""Options of a PostgreSQL store, validated once and shared by both drivers."""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

import psycopg
from psycopg import pq, sql
from psycopg.conninfo import conninfo_to_dict

from safepoint.errors import InvalidURL, StoreError, StoreNotFound, StoreUnavailable
from safepoint.store.tenants import IMPLICIT, check_tenant
from safepoint.store.urls import split_schema
from safepoint.visible import visible

# PostgreSQL truncates longer identifiers (NAMEDATALEN - 1 bytes), which would
# silently put the tables in a schema other than the one asked for.
MAX_SCHEMA_BYTES = 63
DEFAULT_SCHEMA = "safepoint"


@dataclass(frozen=True, slots=True)
class PostgresConfig:
    """Everything ``open_store("postgresql://…", **options)`` accepts; see its docstring."""

    # The libpq URL (``?schema=`` taken out); it may hold the password, and a
    # repr lands in logs and tracebacks.
    url: str = field(repr=False)
    schema: str = DEFAULT_SCHEMA
    min_size: int = 1
    max_size: int = 10
    timeout: float = 30.0
    connect_timeout: float = 10.0
    prepare_threshold: int | None = 5
    # Open an existing store only and never write (``open_store(..., read_only=True)``).
    read_only: bool = False
    # The tenant whose rows every transaction may see (store/tenants.py; checked by opening.py).
    tenant: str = IMPLICIT

    @classmethod
    def from_options(cls, url: str, options: dict[str, Any]) -> PostgresConfig:
        """Validate ``url`` and ``options``; ``InvalidURL`` names what is wrong (never the password).

        A ``schema`` query parameter in the URL chooses the schema unless the
        ``schema`` option does; either way it is taken out of the URL, which
        libpq would refuse with it.
        """
        unknown = set(options) - {
            "schema",
            "min_size",
            "max_size",
            "timeout",
            "connect_timeout",
            "prepare_threshold",
            "read_only",
            "tenant",
        }
        if unknown:
            names = ", ".join(sorted(visible(str(name), max_len=40) for name in unknown))
            raise InvalidURL(f"unknown option(s) for a PostgreSQL store: {names}")
        url, url_schema = split_schema(url)
        if url_schema is not None and "schema" not in options:
            options = {**options, "schema": url_schema}
        valid = True
        try:
            conninfo_to_dict(url)
        except psycopg.ProgrammingError:
            valid = False
        if not valid:
            # Raised outside the except block, chaining nothing: libpq's
            # message may quote parts of the URL, password included. An
            # option libpq does not know is named, its value never shown (a
            # misspelt ?pasword= holds one); any other fault shows the URL
            # with its query values masked.
            strangers = unknown_url_options(url)
            if strangers:
                names = ", ".join(visible(name, max_len=40) for name in strangers)
                raise InvalidURL(
                    f"unknown option(s) in the PostgreSQL URL: {names} (a URL takes libpq's connection "
                    "parameters and ?schema=; the store's own options are open_store's keyword arguments)"
                )
            raise InvalidURL(f"{redact(_query_values_masked(url))} is not a valid PostgreSQL URL")
        config = cls(url, **options)
        config._check()
        return config

    def _check(self) -> None:
        if type(self.read_only) is not bool:
            raise InvalidURL(f"read_only must be True or False, not {type(self.read_only).__name__}")
        check_tenant(self.tenant)
        schema = self.schema
        if not isinstance(schema, str) or not schema or "\x00" in schema:
            raise InvalidURL("schema must be a non-empty str without NUL characters")
        if len(schema.encode("utf-8", "surrogatepass")) > MAX_SCHEMA_BYTES:
            raise InvalidURL(f"schema name must be at most {MAX_SCHEMA_BYTES} bytes")
        if not _int_in(self.min_size, 0, MAX_POOL_SIZE) or not _int_in(self.max_size, 1, MAX_POOL_SIZE):
            raise InvalidURL(f"min_size and max_size must be ints up to {MAX_POOL_SIZE}, with max_size >= 1")
        if self.max_size < self.min_size:
            raise InvalidURL(f"max_size ({self.max_size}) must be at least min_size ({self.min_size})")
        for name in ("timeout", "connect_timeout"):
            value = getattr(self, name)
            # Finite and bounded: libpq takes whole seconds as an int, the pool a float.
            if type(value) not in (int, float) or not 0 < value <= MAX_TIMEOUT:
                raise InvalidURL(f"{name} must be a positive number of seconds, at most {MAX_TIMEOUT}")
        threshold = self.prepare_threshold
        if threshold is not None and not _int_in(threshold, 0, 2**31 - 1):
            raise InvalidURL("prepare_threshold must be None or an int >= 0")

    @property
    def display_url(self) -> str:
        """The URL with its password masked, for ``Store.url``, reprs and error messages.

        A schema other than the default is shown as ``?schema=``, so the URL
        names the store and opens it again (``safepoint --store``).
        """
        if self.schema == DEFAULT_SCHEMA:
            return redact(self.url)
        separator = "&" if "?" in self.url else "?"
        return redact(f"{self.url}{separator}schema={quote(self.schema, safe='')}")

    def not_found(self, detail: str) -> StoreNotFound:
        """The error for a read-only open that found no store: the masked URL and ``detail``."""
        return StoreNotFound(self.display_url, detail)

    def connect_error(self, exc: psycopg.Error) -> StoreError | StoreNotFound:
        """The error for a connection that could not be opened, safe to log.

        Read-only, a database that does not exist is ``StoreNotFound``.

        libpq's messages quote what it parsed from the URL (a host or port
        that a malformed URL took from the password, an option's value), so
        neither its text nor the psycopg error is kept: the message has the
        masked URL (host, port, database), a fixed phrase for the reason and
        the error class; ``__cause__`` is a copy of the psycopg error (same
        class) holding only that summary. Raise it outside the ``except``
        block, so that the original is not kept as ``__context__`` either.
        """
        code = f", SQLSTATE {exc.sqlstate}" if exc.sqlstate else ""
        reason = _connect_reason(str(exc))
        if self.read_only and reason == "database does not exist":
            return self.not_found("the database does not exist")
        summary = f"{reason} ({type(exc).__name__}{code})"
        # A server down, restarting or being failed over to is StoreUnavailable, so that a
        # process opening the store mid-outage can ride it out (retrying.call) as a running
        # one does; a refusal that stays (credentials, pg_hba, a missing database) is not.
        kind = StoreUnavailable if reason in _PASSING else StoreError
        error = kind(f"PostgreSQL connection failed while connecting to {self.display_url}: {summary}")
        try:
            cause: Exception = type(exc)(summary)
        except Exception:  # a psycopg class that takes other arguments
            cause = psycopg.OperationalError(summary)
        error.__cause__ = cause
        return error

    def connect_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for every connection (the pool's and the DDL setup's)."""
        return {
            # libpq takes whole seconds (and treats 1 as 2); round up, never down to 0 = forever.
            "connect_timeout": max(2, math.ceil(self.connect_timeout)),
            "prepare_threshold": self.prepare_threshold,
            # The drivers send BEGIN and COMMIT themselves, inside the
            # operation's pipeline (see statements.py): psycopg must not add its own.
            "autocommit": True,
        }

    def pool_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``ConnectionPool`` and ``AsyncConnectionPool`` alike."""
        return {
            "conninfo": self.url,
            "kwargs": self.connect_kwargs(),
            "min_size": self.min_size,
            "max_size": self.max_size,
            "timeout": float(self.timeout),
            "name": f"safepoint:{self.schema}",
            "open": False,  # opened explicitly (and awaited, for the async pool)
        }


def search_path(schema: str, context: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> str:
    """The search_path value that makes the unqualified names of the .sql files mean ``schema``.

    The identifier is quoted by psycopg (so any name works and none can inject
    SQL); pg_temp goes last so that a temporary table can never shadow ours.
    """
    return sql.Identifier(schema).as_string(context) + ", pg_temp"


MAX_POOL_SIZE = 10_000
MAX_TIMEOUT = 86_400  # seconds: a day

# URL form: whatever stands between "scheme://" and the *last* "@" before the
# query is credentials. libpq itself stops at the first "@" or "/", so in a
# malformed URL (a "@", "/" or "#" in the password) part of the password
# becomes the host, port or database: masking up to the last "@" hides it.
_URL_CREDENTIALS = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^?]*)@")
# Key/value form and URL query parameters: password=value, quoted or not; also
# libpq's other secrets (sslpassword, oauth_client_secret, scram_client_key …).
_PASSWORD_VALUE = re.compile(r"""(?i)((?:password|secret|scram_\w*key)\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&]*)""")


def unknown_url_options(url: str) -> list[str]:
    """The query parameter names of a ``postgresql://`` URL that libpq does not know, sorted."""
    if not _URL_QUERY.match(url):
        return []
    query = url.partition("?")[2].partition("#")[0]
    names = {unquote(part.partition("=")[0]) for part in query.split("&") if part}
    return sorted(names - _libpq_keywords())


@functools.cache
def _libpq_keywords() -> frozenset[str]:
    return frozenset(option.keyword.decode() for option in pq.Conninfo.get_defaults())


def _query_values_masked(url: str) -> str:
    """``url`` with the value of every query parameter replaced by ``***``."""
    if not _URL_QUERY.match(url):
        return url
    base, _, query = url.partition("?")
    query, mark, fragment = query.partition("#")
    masked = "&".join(part.partition("=")[0] + ("=***" if "=" in part else "") for part in query.split("&"))
    return f"{base}?{masked}{mark}{'***' if fragment else ''}"


_URL_QUERY = re.compile(r"(?i)^postgres(ql)?://[^?]*\?")


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (also in a malformed URL), and
    control characters escaped; the user, host, port and database stay readable."""
    match = _URL_CREDENTIALS.match(url)
    if match is not None:
        user, colon, _password = match["userinfo"].partition(":")
        if colon:
            url = f"{match['scheme']}{user}:***@{url[match.end() :]}"
    return visible(_PASSWORD_VALUE.sub(r"\1***", url), max_len=500)


# libpq's message -> a fixed phrase: only these words reach the error text.
_REASONS = (
    ("connection refused", "connection refused"),
    ("timeout expired", "timed out"),
    ("could not translate host name", "host name not found"),
    ("name or service not known", "host name not found"),
    ("password authentication failed", "password authentication failed"),
    ("no password supplied", "no password supplied"),
    ("pg_hba.conf", "rejected by pg_hba.conf"),
    ("database", "database does not exist"),
    ("role", "role does not exist"),
    ("too many", "too many connections"),
    ("remaining connection slots", "too many connections"),
    ("starting up", "the server is starting up"),
    ("not yet accepting connections", "the server is starting up"),
    ("recovery mode", "the server is recovering from a crash"),
    ("shutting down", "the server is shutting down"),
    # target_session_attrs=read-write met only standbys: mid-failover, before a promotion
    ("session is read-only", "no server accepts writes (target_session_attrs)"),
    ("no such file or directory", "no server socket at that path"),
    ("network is unreachable", "network unreachable"),
    ("no route to host", "network unreachable"),
    ("ssl", "SSL negotiation failed"),
    ("invalid", "invalid connection option"),
)


# The reasons that pass: the same open succeeds once the server is back (or promoted).
_PASSING = frozenset(
    {
        "connection refused",
        "timed out",
        "too many connections",
        "the server is starting up",
        "the server is recovering from a crash",
        "the server is shutting down",
        "no server accepts writes (target_session_attrs)",
        "no server socket at that path",  # a local server's socket is gone while it is down
        "network unreachable",
        "the server could not be reached",  # e.g. it closed the connection while starting
    }
)


def _connect_reason(message: str) -> str:
    text = message.lower()
    for fragment, reason in _REASONS:
        if fragment in text and (fragment not in ("database", "role") or "does not exist" in text):
            return reason
    return "the server could not be reached"


def _int_in(value: Any, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high
