"""The backend contract as data: every named query's spec against every dialect's SQL.

Each query of ``sqlite/queries.sql`` and ``postgres/*.sql`` opens with its
spec (parameters, result columns, whether it ends its transaction, whether
a dialect may lack it; see ``store/sqlfiles.py``). These tests fail when a
query is missing from a dialect or from the spec, when the dialects' headers
disagree, when an operation asks for a query no spec names, and when a
dialect's SQL, prepared against a real schema, returns other columns than
its spec says.
"""

from __future__ import annotations

import ast
import re
import sqlite3
from pathlib import Path

import psycopg
import pytest
from psycopg import pq

import safepoint
from safepoint.store.postgres.statements import QUERIES, qualified_sql
from safepoint.store.query_specs import DIALECTS, QUERY_SPECS, NamedQuery, load_dialect
from safepoint.store.sqlite.driver import SQLiteDriver

SRC = Path(__file__).resolve().parent.parent / "src" / "safepoint"


def _dialect(name: str) -> dict[str, NamedQuery]:
    return load_dialect(*DIALECTS[name])


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_every_dialect_has_every_query_with_the_same_spec(dialect: str) -> None:
    """A dialect has every query the spec names (optional ones aside), each under the same header."""
    queries = _dialect(dialect)
    missing = {name for name, spec in QUERY_SPECS.items() if not spec.optional} - set(queries)
    assert not missing, f"{dialect} lacks {sorted(missing)}"
    assert set(queries) <= set(QUERY_SPECS)
    differing = [name for name, query in queries.items() if query.spec != QUERY_SPECS[name]]
    assert not differing, f"{dialect}'s headers differ from the other dialects' for {differing}"


def test_a_query_only_some_dialects_have_is_optional() -> None:
    """A query one dialect lacks is marked optional wherever it is written (the others answer unsupported)."""
    every = [set(_dialect(name)) for name in DIALECTS]
    partial = set.union(*every) - set.intersection(*every)
    assert partial == {name for name, spec in QUERY_SPECS.items() if spec.optional}
    assert QUERY_SPECS["save_next"].optional  # PostgreSQL's one-statement save


def test_every_declared_parameter_is_used_by_some_dialect() -> None:
    """The header's parameters are exactly those the dialects' SQL uses, together (none left over)."""
    used: dict[str, set[str]] = {name: set() for name in QUERY_SPECS}
    for _package, _files, placeholder in DIALECTS.values():
        pattern = re.compile(placeholder)
        for name, query in load_dialect(_package, _files, placeholder).items():
            code = "\n".join(line.split("--", 1)[0] for line in query.sql.splitlines())
            used[name] |= set(pattern.findall(code))
    unused = {name: set(spec.params) - used[name] for name, spec in QUERY_SPECS.items()}
    assert not {name: extra for name, extra in unused.items() if extra}


def test_every_query_an_operation_asks_for_has_a_spec() -> None:
    """Every name in a ``Query(...)`` of the package's source is a query the spec declares."""
    asked: dict[str, str] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Query" and node.args:
                for const in ast.walk(node.args[0]):
                    if isinstance(const, ast.Constant) and isinstance(const.value, str):
                        asked[const.value] = str(path.relative_to(SRC))
            # for name in ("delete_checkpoints", "delete_run"): yield Query(name, ...)
            if isinstance(node, ast.For) and isinstance(node.iter, ast.Tuple):
                calls = [
                    n
                    for n in ast.walk(node)
                    if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Query"
                ]
                if calls:
                    for const in node.iter.elts:
                        if isinstance(const, ast.Constant) and isinstance(const.value, str):
                            asked[const.value] = str(path.relative_to(SRC))
    assert len(asked) > 30  # the scan found the operations
    unknown = {name: where for name, where in asked.items() if name not in QUERY_SPECS}
    assert not unknown


def test_sqlite_queries_return_the_columns_their_spec_says(tmp_path: Path) -> None:
    """Each SQLite query, compiled against a fresh store (EXPLAIN: nothing runs), has the spec's columns.

    The compiled program's ResultRow instruction says how many columns a row
    has; a statement without one returns no rows. Binding only the declared
    parameters also proves the SQL uses no other.
    """
    path = tmp_path / "specs.db"
    SQLiteDriver(str(path)).close()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        wrong = {}
        for name, query in _dialect("sqlite").items():
            program = conn.execute("EXPLAIN " + query.sql, dict.fromkeys(query.spec.params)).fetchall()
            # (PRAGMA incremental_vacuum steps a ResultRow of no columns: no rows either.)
            widths = {row[3] for row in program if row[1] == "ResultRow" and row[3]}
            if widths != ({len(query.spec.returns)} if query.spec.returns else set()):
                wrong[name] = (sorted(widths), query.spec.returns)
        assert not wrong
    finally:
        conn.close()


def test_postgres_queries_return_the_columns_their_spec_says(postgres_dsn: str, pg_schema: str) -> None:
    """Each PostgreSQL query, prepared in a schema this test creates (and drops), has the spec's columns.

    The server describes the prepared statement: its parameters (each named
    one a declared parameter) and its result columns, which must be as many
    as the spec names; nothing runs.
    """
    safepoint.open_store(postgres_dsn, schema=pg_schema).close()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', %s, false)", [pg_schema])
        qualified = qualified_sql(pg_schema, "default", conn)
        wrong = {}
        for index, (name, query) in enumerate(_dialect("postgresql").items()):
            order: list[str] = []

            def number(match: re.Match[str], order: list[str] = order) -> str:
                if match[1] not in order:
                    order.append(match[1])
                return f"${order.index(match[1]) + 1}"

            text = re.sub(r"%\((\w+)\)s", number, qualified.get(name, query.sql))
            statement = f"spec_{index}".encode()
            prepared = conn.pgconn.prepare(statement, text.encode())
            assert prepared.status == pq.ExecStatus.COMMAND_OK, (name, prepared.error_message)
            described = conn.pgconn.describe_prepared(statement)
            assert set(order) <= set(query.spec.params), name
            if described.nfields != len(query.spec.returns):
                wrong[name] = (described.nfields, query.spec.returns)
        assert not wrong


def test_postgres_statements_that_go_alone_name_their_schema() -> None:
    """Every table a final PostgreSQL statement names is {schema}-qualified, and no other statement is.

    A final statement goes alone, with no search_path statement before it: an
    unqualified name would resolve through the session's default search_path,
    where ``public.safepoint_runs`` may be another store's table.
    """
    unqualified, misplaced = [], []
    for name, query in QUERIES.items():
        code = "\n".join(line.split("--", 1)[0] for line in query.sql.splitlines())
        if query.spec.ends_transaction:
            bare = re.findall(r"(?<!\{schema\}\.)\bsafepoint_\w+", code)
            unqualified += [(name, table) for table in bare]
        elif "{" in code:
            misplaced.append(name)
    assert any(query.spec.ends_transaction for query in QUERIES.values())
    assert (unqualified, misplaced) == ([], [])
