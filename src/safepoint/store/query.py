"""The vocabulary every store operation and every driver share: the bottom of ``store/``.

An operation is a generator (``Op``) that yields ``Query`` objects — a named
query of the dialect's ``.sql`` files and its parameters — and receives each
one's rows back; it never touches a connection. A driver opens the
transaction, runs the queries the operation asks for and commits when the
generator returns, or rolls back when it raises. This is how sync and async
stores share one implementation of each operation.

What an operation needs from the rest of the store comes in as a protocol
(``SaveInput``: the prepared save, whatever prepares it), so this module and
the operations import nothing above them.

The backend contract is data: every named query has a spec (``QuerySpec``:
its parameters, its result columns, whether its transaction may end with
it, whether a dialect may lack it), written as a header above its SQL in
each dialect's ``.sql`` file (the format is in ``sqlfiles.py``). A driver
hands an operation each query's rows as named rows built from that spec
(``row.run_ref``, not ``row[1]``), and ``tests/test_query_specs.py`` prepares
every query of every dialect against a real schema and checks its columns
against the spec, and that no query is missing from a dialect or the spec.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from safepoint.messagelist import StoredView
from safepoint.model import Checkpoint, ScrubReport

from .sqlfiles import load_queries

T = TypeVar("T")


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


Row = NamedRow


@dataclass(frozen=True, slots=True)
class Query:
    """Run the named query with ``params``; or, with ``many``, once per dict in it.

    ``optional``: a dialect may lack the query (its spec says ``optional``);
    a driver without it answers ``UNSUPPORTED`` instead of rows, and the
    operation goes another way.
    """

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    many: list[dict[str, Any]] | None = None
    optional: bool = False


class _Unsupported(list[NamedRow]):
    """The answer to an optional query the driver does not run: no rows, and recognisably so."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSUPPORTED"


# Compared by identity (``rows is UNSUPPORTED``); an empty list, so code that
# only asks "any rows?" reads it as none.
UNSUPPORTED: list[NamedRow] = _Unsupported()

Op = Generator[Query, list[Row], T]


class Driver(Protocol):
    """What a backend provides: run one operation in one transaction.

    ``run`` must commit when the operation returns and roll back (changing
    nothing) when it raises; ``write=True`` operations must be serialized
    per run, so that the head-step check inside them cannot race.

    ``capabilities`` are the optional queries (``QuerySpec.optional``) the
    driver runs, e.g. PostgreSQL's one-statement save, ``save_next``; to any
    other optional query it answers ``UNSUPPORTED``, and the operation goes
    the general way.
    """

    dialect: str

    @property
    def capabilities(self) -> frozenset[str]: ...

    def run(self, op: Op[T], *, write: bool) -> T: ...

    def close(self) -> None: ...


class AsyncDriver(Protocol):
    """The async driver contract: the same as ``Driver``, awaited."""

    dialect: str

    @property
    def capabilities(self) -> frozenset[str]: ...

    async def run(self, op: Op[T], *, write: bool) -> T: ...

    async def close(self) -> None: ...


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
    """One named query of a dialect: its SQL text (the header included) and its spec."""

    sql: str
    spec: QuerySpec


# The header lines of a query block, right after its ``-- name:`` line.
_HEADER = re.compile(r"^--\s*(params|returns|ends|optional):\s*(.*?)\s*$")
_NONE = {"params": "none", "returns": "nothing"}


def parse_spec(name: str, text: str) -> QuerySpec:
    """The spec in the header of a query block (see ``sqlfiles.py`` for the format)."""
    header: dict[str, str] = {}
    key = ""
    for line in text.splitlines():
        if key and header[key].endswith(","):  # a list goes on over the next comment line
            header[key] += " " + line.strip().removeprefix("--").strip()
            continue
        match = _HEADER.match(line.strip())
        if match is None:
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

    return QuerySpec(
        name,
        params=names("params"),
        returns=names("returns"),
        ends_transaction="ends" in header,
        optional="optional" in header,
    )


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
            spec = parse_spec(name, text)
            code = "\n".join(line.split("--", 1)[0] for line in text.splitlines())
            undeclared = set(pattern.findall(code)) - set(spec.params)
            if undeclared:
                raise ValueError(f"{package}/{filename}: {name} uses undeclared {sorted(undeclared)}")
            found[name] = NamedQuery(text, spec)
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


@dataclass(frozen=True, slots=True)
class Loaded:
    """A loaded checkpoint as stored, and where its blob references are.

    ``blob_messages`` are the indexes of messages that hold references;
    ``stored_blobs`` the referenced values the database blob target read in
    the same transaction (still in their stored framing).
    """

    checkpoint: Checkpoint
    blob_messages: list[int]
    has_blobs: bool
    stored_blobs: dict[str, bytes]


class SavePlan(Protocol):
    """What a save does to the message log (the delta planner's plan), as ``ops.save`` reads it.

    ``keep`` leading messages are already stored; ``bodies`` are appended;
    ``chains`` covers the whole new view of ``total`` messages.
    """

    @property
    def keep(self) -> int: ...

    @property
    def bodies(self) -> list[bytes]: ...

    @property
    def chains(self) -> list[bytes]: ...

    @property
    def total(self) -> int: ...

    def ranges(self, first_seq: int) -> list[tuple[int, int]]:
        """The new view's ranges when ``bodies`` get seqs from ``first_seq`` on."""
        ...


PlanT = TypeVar("PlanT", bound=SavePlan)
PlanT_co = TypeVar("PlanT_co", bound=SavePlan, covariant=True)


class BlobWriter(Protocol):
    """A blob target as a save's transaction sees it: make the pending blobs durable."""

    def write(self, pending: Mapping[str, bytes], now: int) -> Generator[Any, Any, None]:
        """Inside the transaction, before the row that references them (may yield queries)."""
        ...


class SaveInput(Protocol[PlanT_co]):
    """Exactly what ``ops.save`` needs from a prepared save (``pipeline.PreparedSave`` today).

    ``fields`` are the header fields as they will be stored (scrubbed,
    offloaded), with ``labels`` and ``counters`` among them; ``plan`` works
    out the message delta against a stored view (``ops.save`` calls it again
    when the run's head is not the view the plan was made from); ``blobs``
    is the blob target, None when the store offloads nothing.
    """

    @property
    def fields(self) -> Any: ...

    @property
    def blobs(self) -> BlobWriter | None: ...

    def plan(self, view: StoredView | None, messages: list[Any]) -> PlanT_co:
        """The message delta against ``view``."""
        ...

    def report(self) -> ScrubReport:
        """What scrubbing replaced, by rule and path (the header records it)."""
        ...

    def blob_digests(self) -> str | None:
        """The row's ``blobs`` column: every digest the header and new messages reference."""
        ...

    def pending_blobs(self) -> dict[str, bytes]:
        """New values to write to the blob target (by digest), before the row commits."""
        ...
