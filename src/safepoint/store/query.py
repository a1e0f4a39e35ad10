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

The rows an operation gets back are named rows built from each query's
spec (``query_specs.py``: the backend contract as data).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from safepoint.messagelist import StoredView
from safepoint.model import Checkpoint, ScrubReport
from safepoint.observe import QueryHook

from .query_specs import NamedRow

T = TypeVar("T")

# A row of a named query: a tuple whose columns are also attributes (query_specs.NamedRow).
Row = NamedRow


# Not frozen: made on every save's path, where frozen's object.__setattr__ per field costs
# more than the rest of the object (about 1.3 K instructions a field). Never changed once made.
@dataclass(slots=True)
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


@dataclass(frozen=True, slots=True)
class Unopened:
    """A result value a wrapper of the operation could not give back (a sealed value that
    does not open), in place of the value, naming the error's class: a listing's row then
    shows its run as unreadable instead of failing the whole listing (``sealed_ops``)."""

    error: str


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
    # Statement-level tracing (safepoint.observe.QueryObserver): open_store sets it; None costs nothing.
    on_query: QueryHook | None

    @property
    def capabilities(self) -> frozenset[str]: ...

    def run(self, op: Op[T], *, write: bool) -> T: ...

    def run_joined(self, op: Op[T], rebuild: Callable[[], Op[T]], *, weight: int) -> T:
        """Run the save ``op`` as ``run(op, write=True)`` does, perhaps in a transaction shared
        with other saves made at the same moment (group commit), each keeping its own outcome.

        A driver that does not group runs ``op`` alone. One that does runs
        each save under a savepoint of its own, returns only after the shared
        commit, and runs ``rebuild()`` alone for any save whose shared
        transaction failed as a whole; ``weight`` (the save's new bytes)
        bounds a batch.
        """
        ...

    def close(self) -> None: ...


class AsyncDriver(Protocol):
    """The async driver contract: the same as ``Driver``, awaited."""

    dialect: str
    on_query: QueryHook | None  # as Driver.on_query

    @property
    def capabilities(self) -> frozenset[str]: ...

    async def run(self, op: Op[T], *, write: bool) -> T: ...

    async def run_joined(self, op: Op[T], rebuild: Callable[[], Op[T]], *, weight: int) -> T: ...

    async def close(self) -> None: ...


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

    def carriers(self, first_seq: int, step: int) -> list[tuple[int, int]] | None:
        """Each range's first and last carrying step, the new ones in ``step``'s row."""
        ...


PlanT = TypeVar("PlanT", bound=SavePlan)
PlanT_co = TypeVar("PlanT_co", bound=SavePlan, covariant=True)


class BlobWriter(Protocol):
    """A blob target as a save's transaction sees it: make the pending blobs durable."""

    def write(self, pending: Mapping[str, bytes], now: int) -> Generator[Any, Any, None]:
        """Inside the transaction, before the row that references them (may yield queries)."""
        ...


class SaveInput(Protocol[PlanT_co]):
    """Exactly what ``ops.save`` needs from a prepared save (``prepare.PreparedSave`` today).

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
