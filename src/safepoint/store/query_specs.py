"""The backend contract as data: a spec for every named query, and the named rows built from it.

Every query of a dialect's ``.sql`` files opens with its spec — parameters,
result columns, whether its transaction may end with it, whether a dialect
may lack it (the header format is in ``sqlfiles.py``). ``QuerySpec.row`` is
the named row a driver hands an operation for each of the query's rows
(``row.run_ref``, not ``row[1]``). ``QUERY_SPECS`` is the contract across
dialects; ``tests/test_query_specs.py`` prepares every query of every
dialect against a real schema and checks its columns against the spec, and
that no query is missing from a dialect or the spec.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any, ClassVar

from .sqlfiles import load_queries


class NamedRow(tuple[Any, ...]):
    """A row of a named query: a tuple whose columns are also attributes, named by the query's spec.

    Each query's spec makes a subclass (``QuerySpec.row``) with one property
    per column; unpacking by position still works, for code that reads every
    column at once.
    """

    __slots__ = ()
    columns: ClassVar[tuple[str, ...]] = ()

    if TYPE_CHECKING:  # the columns are the spec's, known when the .sql files are read

        def __getattr__(self, name: str) -> Any: ...

    @classmethod
    def of(cls, **values: Any) -> NamedRow:
        """A row made up by an operation (e.g. what a query returns for a run that does not exist yet)."""
        if set(values) != set(cls.columns):
            raise TypeError(f"{cls.__name__} has the columns {', '.join(cls.columns)}")
        return cls(values[name] for name in cls.columns)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(self.columns, self, strict=False))
        return f"{type(self).__name__}({shown})"


@dataclass(frozen=True, slots=True)
class QuerySpec:
    """The contract of one named query, the same for every dialect.

    ``params`` are the names an operation passes (a dialect's SQL uses some
    or all of them); ``returns`` the result columns in order (empty: the
    statement returns no rows). ``ends_transaction``: the statement is the
    whole of its operation's write, so a driver may commit with it in the
    same round trip (PostgreSQL sends it with BEGIN and COMMIT as one
    message); whatever the operation asks next may then run in a new
    transaction. ``optional``: a dialect may lack it (see ``Query.optional``).
    """

    name: str
    params: tuple[str, ...]
    returns: tuple[str, ...]
    ends_transaction: bool = False
    optional: bool = False
    row: type[NamedRow] = field(default=NamedRow, compare=False, repr=False)

    def __post_init__(self) -> None:
        for column in self.returns:
            # A column is an attribute of the row: never a tuple method's name (count, index).
            if not column.isidentifier() or keyword.iskeyword(column) or hasattr(tuple, column):
                raise ValueError(f"query {self.name!r}: {column!r} cannot name a column")
        if len(set(self.returns)) != len(self.returns):
            raise ValueError(f"query {self.name!r} names a column twice")
        attributes: dict[str, Any] = {"__slots__": (), "columns": self.returns}
        for index, column in enumerate(self.returns):
            attributes[column] = property(itemgetter(index), doc=f"column {index} of {self.name}")
        object.__setattr__(self, "row", type(self.name, (NamedRow,), attributes))

    def rows(self, raw: Iterable[Iterable[Any]]) -> list[NamedRow]:
        """The driver's rows as this query's named rows."""
        return list(map(self.row, raw))


@dataclass(frozen=True, slots=True)
class NamedQuery:
    """One named query of a dialect: its SQL text (without the spec header) and its spec."""

    sql: str
    spec: QuerySpec


# The header lines of a query block, right after its ``-- name:`` line.
_HEADER = re.compile(r"^--\s*(params|returns|ends|optional):\s*(.*?)\s*$")
_NONE = {"params": "none", "returns": "nothing"}


def parse_spec(name: str, text: str) -> tuple[QuerySpec, str]:
    """The spec in the header of a query block (see ``sqlfiles.py`` for the format),
    and the block without its header: the SQL a driver sends (the header is for
    us; a statement need not carry it to the server or to a ``trace`` callback)."""
    header: dict[str, str] = {}
    key = ""
    lines = text.splitlines()
    body = len(lines)
    for number, line in enumerate(lines):
        if key and header[key].endswith(","):  # a list goes on over the next comment line
            header[key] += " " + line.strip().removeprefix("--").strip()
            continue
        match = _HEADER.match(line.strip())
        if match is None:
            body = number
            break
        key = match[1]
        if key in header:
            raise ValueError(f"query {name!r}: its header says {key!r} twice")
        header[key] = match[2]
    for key in ("params", "returns"):
        if key not in header:
            raise ValueError(f"query {name!r} has no '-- {key}:' line in its header")
    for key, only in (("ends", "transaction"), ("optional", "yes")):
        if key in header and header[key] != only:
            raise ValueError(f"query {name!r}: '-- {key}:' takes only {only!r}")

    def names(key: str) -> tuple[str, ...]:
        value = header[key]
        return () if value == _NONE[key] else tuple(part.strip() for part in value.split(","))

    spec = QuerySpec(
        name,
        params=names("params"),
        returns=names("returns"),
        ends_transaction="ends" in header,
        optional="optional" in header,
    )
    return spec, "\n".join(lines[body:]).strip()


def load_dialect(package: str, filenames: Iterable[str], placeholder: str) -> dict[str, NamedQuery]:
    """Every named query of a dialect's ``filenames``, each with the spec its header declares.

    ``placeholder`` is the dialect's parameter syntax as a pattern whose group
    is the name; a query whose SQL uses a parameter its header does not
    declare is refused here, when the file is read.
    """
    pattern = re.compile(placeholder)
    found: dict[str, NamedQuery] = {}
    for filename in filenames:
        for name, text in load_queries(package, filename).items():
            if name in found:
                raise ValueError(f"{package}: query {name!r} is defined twice")
            spec, sql = parse_spec(name, text)
            code = "\n".join(line.split("--", 1)[0] for line in sql.splitlines())
            undeclared = set(pattern.findall(code)) - set(spec.params)
            if undeclared:
                raise ValueError(f"{package}/{filename}: {name} uses undeclared {sorted(undeclared)}")
            found[name] = NamedQuery(sql, spec)
    return found


# Where each dialect's named queries are, and how its SQL writes a parameter.
DIALECTS = {
    "sqlite": ("safepoint.store.sqlite", ("queries.sql",), r"(?<![:\w]):(\w+)"),
    "postgresql": ("safepoint.store.postgres", ("queries.sql", "save.sql"), r"%\((\w+)\)s"),
}


def _specs() -> dict[str, QuerySpec]:
    """Every dialect's specs together, read from the files alone (no dialect package is imported)."""
    specs: dict[str, QuerySpec] = {}
    for package, filenames, placeholder in DIALECTS.values():
        folder = "safepoint.store"  # its subfolders hold the files, readable without psycopg
        sub = package.rpartition(".")[2]
        named = load_dialect(folder, [f"{sub}/{name}" for name in filenames], placeholder)
        for name, query in named.items():
            specs.setdefault(name, query.spec)
    return specs


# The contract: every named query of every dialect, by name. That the dialects
# agree with it (and with each other) is tests/test_query_specs.py's to check.
QUERY_SPECS: dict[str, QuerySpec] = _specs()
