"""Options of a PostgreSQL store, validated once and shared by both drivers."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from safepoint.errors import InvalidURL

# PostgreSQL truncates longer identifiers (NAMEDATALEN - 1 bytes), which would
# silently put the tables in a schema other than the one asked for.
MAX_SCHEMA_BYTES = 63


@dataclass(frozen=True, slots=True)
class PostgresConfig:
    """Everything ``open_store("postgresql://…", **options)`` accepts; see its docstring."""

    url: str
    schema: str = "safepoint"
    min_size: int = 1
    max_size: int = 10
    timeout: float = 30.0
    connect_timeout: float = 10.0
    prepare_threshold: int | None = 5

    @classmethod
    def from_options(cls, url: str, options: dict[str, Any]) -> PostgresConfig:
        """Validate ``url`` and ``options``; ``InvalidURL`` names what is wrong (never the password)."""
        unknown = set(options) - {
            "schema",
            "min_size",
            "max_size",
            "timeout",
            "connect_timeout",
            "prepare_threshold",
        }
        if unknown:
            raise InvalidURL(f"unknown option(s) for {redact(url)!r}: {', '.join(sorted(unknown))}")
        try:
            conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            # libpq's message may quote parts of the URL, password included.
            raise InvalidURL(f"{redact(url)!r} is not a valid PostgreSQL URL") from exc
        config = cls(url, **options)
        config._check()
        return config

    def _check(self) -> None:
        schema = self.schema
        if not isinstance(schema, str) or not schema or "\x00" in schema:
            raise InvalidURL("schema must be a non-empty str without NUL characters")
        if len(schema.encode("utf-8", "surrogatepass")) > MAX_SCHEMA_BYTES:
            raise InvalidURL(f"schema name must be at most {MAX_SCHEMA_BYTES} bytes")
        if not _positive_int(self.min_size, allow_zero=True) or not _positive_int(self.max_size):
            raise InvalidURL("min_size and max_size must be ints, with max_size >= 1")
        if self.max_size < self.min_size:
            raise InvalidURL(f"max_size ({self.max_size}) must be at least min_size ({self.min_size})")
        for name in ("timeout", "connect_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise InvalidURL(f"{name} must be a positive number of seconds, not {value!r}")
        threshold = self.prepare_threshold
        if threshold is not None and not _positive_int(threshold, allow_zero=True):
            raise InvalidURL(f"prepare_threshold must be None or an int >= 0, not {threshold!r}")

    @property
    def display_url(self) -> str:
        """The URL with its password masked, for ``Store.url``, reprs and error messages."""
        return redact(self.url)

    def connect_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for every connection (the pool's and the DDL setup's)."""
        return {
            # libpq takes whole seconds (and treats 1 as 2); round up, never down to 0 = forever.
            "connect_timeout": max(2, math.ceil(self.connect_timeout)),
            "prepare_threshold": self.prepare_threshold,
            # The drivers send BEGIN and COMMIT themselves, inside the
            # operation's pipeline (see steps.py): psycopg must not add its own.
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


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.password is None:
        return url if "password" not in url.lower() else "<URL with a password>"
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def _positive_int(value: Any, *, allow_zero: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return value >= 0 if allow_zero else value >= 1
