"""What both PostgreSQL drivers send, written once and free of I/O.

A driver opens a transaction and asks this module for its statements:
``op_statements`` turns an operation's named queries (``store/ops/``) into SQL
after pointing search_path at the store's schema (``schema.py`` holds the
DDL setup's). The sync driver blocks on each statement and the async driver
awaits it; that loop is all either of them holds (the split psycopg itself
uses between its generators and its waiting functions).
``errors.Transaction`` passes either on, remembering where it stands so
that a psycopg error becomes safepoint's.

Round trips: operations run in psycopg's pipeline mode on autocommit
connections, with BEGIN and COMMIT sent as statements of the pipeline, and a
driver waits only for statements whose rows the operation reads
(``Statement.fetch``); in a write transaction each wait is followed by a
Sync, which arms the server's idle-in-transaction timeout while the
operation works on the rows. BEGIN, set_config and run_head travel
together, and everything a save writes travels with its COMMIT and the
pipeline's last Sync, so ``ops.save`` costs three round trips (two waits
and that Sync). (psycopg's own ``transaction()``
inside a pipeline syncs on entering and on leaving it, which made five.)
A final statement (``Statement.final``: ``ops.save``'s one-statement save
``save_next``, and the queue and lease calls, each one UPDATE) that opens its
transaction is the whole of a write. ``save_next``, ``claim``, ``heartbeat``
and ``release`` go alone (``alone``): one statement on the autocommit
connection, its own implicit transaction, prepared like any other, one round
trip; each is a call of a schema function that takes the tenant first and
sets it before it reads a row (``qualified_sql`` writes the tenant into the
SQL, ``SETS_TENANT``), so no settings statement goes first. The other final
statements (enqueue, a run's hold and its release) travel as BEGIN, the
settings statement, the call and COMMIT in one pipeline, still one round
trip. A failure
in a statement nobody waited for surfaces at the next wait (at the latest, the
commit's) and leaves the transaction aborted; leaving the connection's
context (``pool.connection()``) then rolls it back, as it does after an
operation's own error. The remaining gap where a client stopped mid-write
keeps a lock with no timeout armed: between a write of ``ops.save``'s general
way (a run's first save, saves with blobs) or of a maintenance operation and
its COMMIT.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from psycopg import errors, sql

from safepoint.errors import StoreError
from safepoint.store.query import UNSUPPORTED, Op, Query, Row
from safepoint.store.query_specs import DIALECTS, QuerySpec, load_dialect
from safepoint.store.sqlfiles import load_queries

T = TypeVar("T")
_PACKAGE = __package__ or "safepoint.store.postgres"
# Each query's SQL and spec (its header in queries.sql, save.sql): whether a
# driver waits for its rows (it returns some), whether it ends its
# transaction, and the named rows the operation gets back.
QUERIES = load_dialect(*DIALECTS["postgresql"])
# The optional queries (QuerySpec.optional) this dialect has: the drivers' capabilities.
CAPABILITIES = frozenset(name for name, query in QUERIES.items() if query.spec.optional)
# What is sent of each: its SQL without comments, each run of whitespace one space.
SENT: dict[str, str] = {}  # filled below, once compact_sql is defined
# The driver's own statements (search_path, the DDL setup's): no operation's.
SETUP = load_queries(_PACKAGE, "setup.sql")

# A query whose spec returns no columns is never waited for. One whose spec
# ends its transaction (Statement.final: a save's one statement, and the
# queue and lease calls, each one UPDATE) is the whole of a write when it
# opens its transaction, and goes alone (see ``alone``). Its rows are read
# after the commit, which does not change them; what an operation asks next
# (a lost lease's state, a declined save's fallback) runs in a new
# transaction.

# How a transaction starts, by ``write``. Always explicit rather than left
# to the server's default_transaction_isolation, which a DBA may have changed.
# Writes: READ COMMITTED, serialized per run by the FOR UPDATE lock on the run
# row; a writer that waited for that lock re-reads the row as committed and
# fails its step check with Conflict, where REPEATABLE READ would abort with a
# serialization failure. Reads: one snapshot for the two queries of a load,
# and READ ONLY can never fail to serialize.
BEGIN = {
    True: b"BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE",
    False: b"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
}
COMMIT = b"COMMIT"
# A statement that goes alone runs as the server's default transaction, which
# a DBA may have made REPEATABLE READ or SERIALIZABLE (a waiter on a run row
# then fails to serialize instead of re-checking it) or READ ONLY (where
# BEGIN's READ WRITE would have overridden it). Either error rolls it back
# with nothing written, and the drivers send it again the explicit way.
DEFAULTS_REFUSED = (errors.SerializationFailure, errors.ReadOnlySqlTransaction)
SET_SEARCH_PATH = "set_search_path"
# The queries whose parameters go binary (``Statement.binary``): save_next's
# call declares every type in the function's signature.
BINARY = frozenset({"save_next"})
# The final statements that set the transaction's tenant themselves (their SQL names it,
# ``qualified_sql``), so they go alone, with no settings statement before them.
SETS_TENANT = frozenset({"save_next", "claim", "heartbeat", "release"})


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement for a driver to execute; ``many`` runs it once per dict (executemany).

    ``fetch`` says whether to wait for and return its rows; when False the
    driver returns ``[]`` at once (in a pipeline, without waiting).

    ``final``: the transaction commits with this statement, in the same
    round trip: alone, when it opens its transaction (see ``fits_alone``);
    otherwise with the COMMIT that follows it in the pipeline. Its rows come
    back only after the commit. Should the operation go on, what it asks next
    runs in a new transaction.
    """

    name: str
    sql: str | sql.Composed
    params: dict[str, Any] | None = None
    many: list[dict[str, Any]] | None = None
    fetch: bool = True
    # Whole DDL files go through the simple query protocol (several
    # statements in one string); they must never be prepared.
    prepare: bool | None = None
    final: bool = False
    # Parameters (and rows) in binary: bytes as they are, not hex-encoded.
    # Only for statements whose SQL casts or declares every parameter's type
    # (a str goes as text, which does not cast itself to jsonb).
    binary: bool = False
    # The named query's spec: the operation gets its rows as the spec's named rows.
    spec: QuerySpec | None = None


Statements = Generator[Statement, list[Row], T]


# The largest request a statement may make to go alone, in bytes on the
# wire, estimated from above (``request_bytes``). Alone, it is one Parse
# (until it is prepared), Bind, Describe, Execute and Sync, and the server
# must never run it and then wait on the client for the Sync: a client
# stopped there (SIGSTOP, a long GC pause) would keep the locked run row with
# no timeout armed, since the server arms idle_in_transaction_session_timeout
# only at ReadyForQuery, after a Sync. Below 8 KiB in all, libpq hands the
# request to the kernel with one send() (it sends early only once 8 KiB are
# buffered, in pqPutMsgEnd), into a socket with nothing else unsent whose
# buffer holds at least 16 KiB (tcp_wmem's default; a Unix socket's is
# larger): the server gets it whole. A larger statement could leave in
# pieces (Parse and Bind first: the server would open the transaction and
# take the tables' locks, then wait), so it goes inside one simple-protocol
# message with BEGIN and COMMIT (``one_message``), which the server reads
# whole before running any of it. ``tests/test_postgres_save_wire.py`` checks
# the estimate against the bytes a request really took. With binary
# parameters and save_next a call of the schema's function (DDL revision
# 10), a step of two 3,000-character messages is about 7 KiB and goes alone;
# the benchmark agent's 50 KB tool outputs go the long way.
ALONE_MAX_BYTES = 8191
# Per parameter: its length word and format code in Bind, its type in Parse,
# with room to spare; per request: the message headers, Describe, Execute, Sync.
_PER_PARAM = 16
_PER_REQUEST = 64


def request_bytes(statement: Statement) -> int:
    """An upper bound on the bytes ``statement`` sends alone (SQL text included, as when unprepared).

    Binary parameters travel as they are; in text, bytes are hex (two
    characters a byte) and a str counts 4 bytes a character unless it is ASCII
    (UTF-8's most, without encoding it to find out).
    """
    text = statement.sql if isinstance(statement.sql, str) else ""
    size = _PER_REQUEST + len(text.encode()) if text else _PER_REQUEST + ALONE_MAX_BYTES
    for value in (statement.params or {}).values():
        size += _PER_PARAM
        if isinstance(value, bytes):
            size += len(value) if statement.binary else 2 * len(value) + 2
        elif isinstance(value, str):
            size += len(value) if value.isascii() else 4 * len(value)
        elif value is not None:
            size += 24  # an int, float or bool: 8 bytes binary, at most 20 digits as text
    return size


def fits_alone(statement: Statement) -> bool:
    """Whether ``statement`` may go alone: its request is one send() (``ALONE_MAX_BYTES``)."""
    return request_bytes(statement) <= ALONE_MAX_BYTES


def one_message(mogrify: Callable[[Any, Any], str], write: bool, statements: list[Statement]) -> str:
    """BEGIN, ``statements`` and COMMIT as the text of one simple-protocol message.

    Why: in a pipeline psycopg flushes each statement as it is executed. A
    client stopped (SIGSTOP, a long GC pause) after the flush of a statement
    that locks a row but before the flush of the COMMIT leaves the server
    waiting mid-pipeline with the lock held — and the server arms
    idle_in_transaction_session_timeout only when it reports ReadyForQuery,
    after a Sync, so nothing would ever end that transaction while the
    client sleeps. One message reaches the server whole before any of it
    runs, and its COMMIT runs with it. ``mogrify`` renders parameters
    client-side (psycopg's ``ClientCursor.mogrify``). Each statement's
    result comes back in order: BEGIN's first, then one per statement.
    """
    parts = [BEGIN[write].decode()]
    for statement in statements:
        # A statement may end with a comment line or its own semicolon: the
        # separator goes on a line of its own.
        parts.append(mogrify(statement.sql, statement.params).rstrip().rstrip(";"))
    parts.append(COMMIT.decode())
    return "\n;\n".join(parts)


def transaction_settings(search_path: str, tenant: str) -> dict[str, str]:
    """The parameters of ``settings_statement``: the store's schema and tenant, fixed at open."""
    return {"search_path": search_path, "tenant": tenant}


def settings_statement(settings: dict[str, str]) -> Statement:
    """Point the transaction at the store's schema and tenant (set_config, local to it).

    The tenant is what the tables' row-level security admits (DDL revision
    12): a transaction that skipped this statement would see no row at all.
    """
    return Statement(SET_SEARCH_PATH, SETUP["set_search_path"], settings, fetch=False)


def qualified_sql(schema: str, tenant: str, context: Any) -> dict[str, str]:
    """The final statements' SQL for a store in ``schema``: their ``{schema}`` filled with its quoted
    name, and the ``{tenant}`` of those that set it themselves with the tenant's (``SETS_TENANT``).

    A statement that goes alone has no search_path statement before it, so
    it names the schema of every table itself; psycopg quotes the
    identifier and the literal (any name works, none can inject SQL).
    ``context`` is a connection, for the quoting rules.
    """
    ident, literal = sql.Identifier(schema), sql.Literal(tenant)
    return {
        name: sql.SQL(SENT[name]).format(schema=ident, tenant=literal).as_string(context)
        for name, query in QUERIES.items()
        if query.spec.ends_transaction
    }


def op_statements(
    op: Op[T],
    settings: dict[str, str],
    qualified: dict[str, str],
    capabilities: frozenset[str] = CAPABILITIES,
) -> Statements[T]:
    """The statements of one operation's transactions, as SQL.

    Every transaction begins with the settings statement (``settings``, from
    ``transaction_settings``: the schema and the tenant) but one that opens
    with a statement setting its tenant itself (``SETS_TENANT``): that one
    goes alone (``qualified`` holds its SQL, from ``qualified_sql``). Any
    other final statement travels with BEGIN, the settings and COMMIT in one
    pipeline flush, still one round trip. After a final statement, the
    operation's next query opens a new transaction. An optional query outside
    ``capabilities`` is answered ``UNSUPPORTED`` without a statement.
    """
    try:
        query = next(op)
        path_set = False  # whether this transaction has had its settings statement
        while True:
            if query.optional and query.name not in capabilities:
                query = op.send(UNSUPPORTED)
                continue
            statement = _statement(query, qualified)
            if not path_set and not (statement.final and statement.name in SETS_TENANT):
                yield settings_statement(settings)
                path_set = True
            rows = yield statement
            query = op.send(statement.spec.rows(rows) if statement.spec is not None else rows)
            if statement.final:
                path_set = False
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    finally:
        op.close()  # a driver that stops early (an error) leaves the op nothing to resume


def _statement(query: Query, qualified: dict[str, str]) -> Statement:
    named = QUERIES.get(query.name)
    if named is None:
        raise StoreError(f"the postgresql dialect has no query named {query.name!r}")
    spec = named.spec
    fetch = bool(spec.returns)
    text = qualified[query.name] if spec.ends_transaction else SENT[query.name]
    final = spec.ends_transaction
    binary = query.name in BINARY
    return Statement(
        query.name, text, query.params, query.many, fetch=fetch, final=final, binary=binary, spec=spec
    )


def raw_statements(
    text: str, params: dict[str, Any] | None, settings: dict[str, str]
) -> Statements[list[Row]]:
    """One row-returning statement outside the named queries, in the store's schema and tenant
    (tests, tools)."""
    yield settings_statement(settings)
    return (yield Statement("raw statement", text, params))


# A quoted string or identifier (kept as it is), or a run of whitespace and comments.
# (No query uses dollar quoting or E'' strings, whose quotes this would misread.)
_SQL_TOKENS = re.compile(r"""('(?:[^']|'')*'|"(?:[^"]|"")*")|(?:\s|--[^\n]*)+""")


def compact_sql(text: str) -> str:
    """``text`` without its comments, each run of whitespace one space: what travels.

    The .sql files explain each statement in comments; the server needs none
    of it, and a statement sent unprepared (behind PgBouncer, with
    ``prepare_threshold=None``) would carry them on every call.
    """

    def token(match: re.Match[str]) -> str:
        if match[1] is not None:
            return match[1]
        return " "  # a comment ends at its line's end: a space keeps the tokens apart

    return _SQL_TOKENS.sub(token, text).strip()


SENT.update({name: compact_sql(query.sql) for name, query in QUERIES.items()})

READ_ONLY_WRITE = "this store was opened with read_only=True: it writes nothing"
