"""Store URLs: which backend a URL names, and the right form for a near miss.

``scheme_of`` accepts exactly ``sqlite:///…``, ``postgresql://…`` (or
``postgres://…``) and ``memory://``. Anything that is almost one of them —
``sqlite:/x.db`` (one slash: it would name ``x.db`` in the current folder,
or ``/x.db``, depending on who parses it), ``sqlite//x``, ``postgres:/db``,
``postgresql+psycopg://…``, a bare ``file.db`` — is an ``InvalidURL`` whose
message shows the right form.

Errors about a URL never quote it: a URL can carry a password (a mistyped
postgresql:// one, an sqlite one pasted with credentials in its netloc, a
password pasted where the URL should be). They name the scheme when it is a
plain word, and count slashes; the forms they show are fixed text.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from safepoint.errors import InvalidURL

SQLITE_FORM = "sqlite:///relative/path.db (from the current folder) or sqlite:////absolute/path.db"
POSTGRES_FORM = "postgresql://user:password@host:5432/dbname"
MEMORY_FORM = "memory://"
EXPECTED = f"expected {SQLITE_FORM}, {POSTGRES_FORM} or {MEMORY_FORM}"

_SCHEME = re.compile(r"[a-z][a-z0-9+.-]{0,31}")
# Schemes people write for one of ours: another tool's spelling, a typo, a driver suffix.
_LIKE_SQLITE = {"sqlite3", "sqlite2", "sqllite", "sqlit", "file", "db"}
_LIKE_POSTGRES = {"pg", "pgsql", "psql", "postgre", "postgresq", "postgressql", "postgis", "psycopg"}


def scheme_of(url: object) -> str:
    """``"sqlite"``, ``"postgresql"`` or ``"memory"`` for a URL of that form, else ``InvalidURL``."""
    if not isinstance(url, str):
        raise InvalidURL(f"store URL must be a str, not {type(url).__name__}")
    head, colon, rest = url.partition(":")
    scheme = head.strip().lower()
    if not colon or not _SCHEME.fullmatch(scheme):
        raise InvalidURL(_without_scheme(url))
    slashes = len(rest) - len(rest.lstrip("/"))
    if scheme == "sqlite":
        if slashes < 3:
            raise InvalidURL(_sqlite_slashes(slashes))
        return "sqlite"
    if scheme in ("postgresql", "postgres"):
        if slashes < 2:  # three are libpq's own: postgresql:///dbname on the local socket
            raise InvalidURL(
                "a PostgreSQL URL starts with postgresql:// "
                f"(two slashes; this one has {slashes}): {POSTGRES_FORM}"
            )
        return "postgresql"
    if scheme == "memory":
        if rest != "//":
            raise InvalidURL(f"an in-memory store's URL is exactly {MEMORY_FORM}, with nothing after it")
        return "memory"
    if scheme in _LIKE_SQLITE:
        raise InvalidURL(f"unsupported store URL (scheme {scheme!r}): a SQLite file is {SQLITE_FORM}")
    base = scheme.partition("+")[0]
    if base in ("postgresql", "postgres") or base in _LIKE_POSTGRES:
        raise InvalidURL(
            f"unsupported store URL (scheme {scheme!r}): a PostgreSQL URL is {POSTGRES_FORM}"
            " (scheme postgresql or postgres, no driver suffix)"
        )
    if base == "sqlite":
        raise InvalidURL(f"unsupported store URL (scheme {scheme!r}): a SQLite file is {SQLITE_FORM}")
    raise InvalidURL(f"unsupported store URL (scheme {scheme!r}): {EXPECTED}")


def _without_scheme(url: str) -> str:
    """The hint for a URL without a usable scheme: a bare path, or a scheme that lost its colon."""
    start = url.strip().lower()
    if start.startswith("sqlite"):
        return f"a SQLite URL starts with sqlite: and three slashes: {SQLITE_FORM}"
    if start.startswith("postgres"):
        return f"a PostgreSQL URL starts with postgresql:// — {POSTGRES_FORM}"
    if start.startswith("memory"):
        return f"an in-memory store's URL is {MEMORY_FORM}"
    if start.startswith("/"):
        return "a store URL starts with its scheme: for an absolute path put sqlite:/// before it, as in sqlite:////absolute/path.db"
    if "/" in start or start.endswith((".db", ".sqlite", ".sqlite3")):
        return f"a store URL starts with its scheme: for a SQLite file write {SQLITE_FORM}"
    return f"unsupported store URL: {EXPECTED}"


def _sqlite_slashes(slashes: int) -> str:
    if slashes == 2:
        return (
            "this SQLite URL has a host part (two slashes after sqlite:); the path starts after "
            f"the third: {SQLITE_FORM}"
        )
    count = "none" if slashes == 0 else "one"
    return f"a SQLite URL has three slashes after sqlite: (this one has {count}): {SQLITE_FORM}"


def sqlite_path(url: str) -> str:
    """The file a SQLite URL names: ``sqlite:///x.db`` is ``x.db``, ``sqlite:////tmp/x.db`` ``/tmp/x.db``."""
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced "[" in the netloc
        raise InvalidURL("this SQLite URL cannot be parsed") from None
    if parts.netloc or not parts.path.startswith("/") or parts.path == "/":
        raise InvalidURL(f"a SQLite URL must look like {SQLITE_FORM}")
    if parts.query or parts.fragment:
        raise InvalidURL(
            "a SQLite URL takes no ?query or #fragment (options are open_store's keyword arguments);"
            " write ? and # in a file name as %3F and %23"
        )
    path = unquote(parts.path[1:])  # sqlite:///x.db -> x.db, sqlite:////tmp/x.db -> /tmp/x.db
    if "\x00" in path:
        raise InvalidURL("a SQLite URL's path must not contain NUL characters")
    if path.endswith("/") or Path(path).is_dir():
        raise InvalidURL("this SQLite URL names a folder, not a database file")
    return path


def split_schema(url: str) -> tuple[str, str | None]:
    """``url`` without its ``schema`` query parameter, and that parameter's value (None if absent).

    Only the URL form has query parameters (``postgresql://…?schema=x``); the
    other parameters stay exactly as written, in order. Given twice, it is an
    ``InvalidURL``; the value is percent-decoded as libpq decodes the others.
    """
    base, mark, query = url.partition("?")
    if not mark or not _URL_FORM.match(url):
        return url, None
    query, hash_mark, fragment = query.partition("#")
    kept: list[str] = []
    values: list[str] = []
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if unquote(key) == "schema":
            values.append(unquote(value))
        else:
            kept.append(part)
    if not values:
        return url, None
    if len(values) > 1:
        raise InvalidURL("the URL gives ?schema= more than once")
    rest = "&".join(kept)
    return base + ("?" + rest if rest else "") + hash_mark + fragment, values[0]


_URL_FORM = re.compile(r"(?i)^postgres(ql)?://")
