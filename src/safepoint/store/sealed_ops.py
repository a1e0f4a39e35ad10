"""An operation on an encrypted store: its queries' content sealed on the way in, opened on the way out.

``sealed(op, sealer)`` drives ``op`` and stands between it and the driver:
each parameter that holds content is sealed for its place before the
query goes, and each result column that holds content is opened before the
rows come back. Operations, drivers and SQL are the same for an encrypted
store and a plain one; what holds content is named here, by parameter and
column name (the names ``query_specs`` gives every dialect alike):

=============  ==================================  ==========================
name           as a parameter                      as a result column
=============  ==================================  ==========================
header         sealed (run, step)                  opened (run, row's step)
messages       sealed (run, step)                  opened (run, row's step)
chains         sealed (run, step)                  opened (run, row's step)
labels         sealed labels + blind index         opened, index checked
               (``list_runs``: the filter tokens)
counters       a sealed JSON string (run)          opened (SQLite: from the
                                                   sealed header it returns)
error          sealed text (run): last_error       -- (``last_error``: opened)
digest         keyed, when bytes (a checkpoint's)  the plain digest again
head_digest    keyed                               the plain digest again
=============  ==================================  ==========================

The run a value belongs to is the query's ``run_id``; a query that names
its run by ``run_ref`` gets the id an earlier query of the same operation
paired with that ref. The step is the row's own ``step`` column, else the
query's ``step``. Blobs are sealed by their target (``sealed_blobs.py``),
not here.
"""

from __future__ import annotations

from typing import Any, TypeVar

from safepoint import codec
from safepoint.errors import StoreError

from .query import UNSUPPORTED, Op, Query, Row
from .query_specs import QUERY_SPECS
from .sealer import RUN_WIDE, Sealer, UnknownDataKey

T = TypeVar("T")

_STEP_COLUMNS = ("header", "messages", "chains")
_RESULT_COLUMNS = frozenset({*_STEP_COLUMNS, "labels", "counters", "last_error", "digest", "head_digest"})


def sealed(op: Op[T], sealer: Sealer) -> Op[T]:
    """``op`` with its content sealed for the driver and opened for itself."""
    refs: dict[int, str] = {}
    answer: Any = None
    try:
        while True:
            try:
                query = op.send(answer)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            outgoing = _sealed_query(query, sealer, refs)
            rows = yield outgoing
            if rows is UNSUPPORTED or not rows:
                answer = rows
                continue
            answer = yield from _opened(query, rows, sealer, refs)
            if outgoing.name != query.name:  # the variant's extra columns go: the op gets its own
                spec = QUERY_SPECS[query.name]
                answer = [spec.row(getattr(row, column) for column in spec.returns) for row in answer]
    finally:
        op.close()


# Queries an encrypted store asks for in another form: history with each row's
# header, so that the keyed digests it returns can be given back plain.
_VARIANTS = {"history": "history_sealed"}


def _sealed_query(query: Query, sealer: Sealer, refs: dict[int, str]) -> Query:
    if query.name in _VARIANTS:
        return Query(_VARIANTS[query.name], query.params, query.many, query.optional)
    if query.many is not None:
        many = [_sealed_params(query.name, params, sealer, refs) for params in query.many]
        return Query(query.name, query.params, many, query.optional)
    return Query(query.name, _sealed_params(query.name, query.params, sealer, refs), None, query.optional)


def _sealed_params(name: str, params: dict[str, Any], sealer: Sealer, refs: dict[int, str]) -> dict[str, Any]:
    if not any(key in params for key in _PARAM_NAMES):
        return params
    out = dict(params)
    for key in ("digest", "head_digest"):
        value = out.get(key)
        if isinstance(value, bytes | bytearray | memoryview):  # a checkpoint's digest (a blob's is text)
            out[key] = sealer.keyed(bytes(value))
    if out.get("labels") is not None:
        if name == "list_runs":
            out["labels"] = sealer.wanted_labels(out["labels"])
        else:
            out["labels"] = sealer.seal_labels(out["labels"], _run_of(name, params, refs))
    if out.get("counters") is not None:
        out["counters"] = sealer.seal_json(out["counters"], _run_of(name, params, refs), "counters")
    if out.get("error") is not None:
        out["error"] = sealer.seal_text(out["error"], _run_of(name, params, refs), "last_error")
    for column in _STEP_COLUMNS:
        value = out.get(column)
        if value is not None and (column != "header" or len(value)):
            out[column] = sealer.seal(bytes(value), _run_of(name, params, refs), params["step"], column)
    return out


_PARAM_NAMES = frozenset({*_STEP_COLUMNS, "labels", "counters", "error", "digest", "head_digest"})


def _opened(query: Query, rows: list[Row], sealer: Sealer, refs: dict[int, str]) -> Op[list[Row]]:
    columns = rows[0].columns
    run_id = query.params.get("run_id")
    if run_id is not None and "run_ref" in columns:
        for row in rows:
            if row.run_ref is not None:
                refs[row.run_ref] = run_id
    if _RESULT_COLUMNS.isdisjoint(columns):
        return rows
    for attempt in (1, 2):
        try:
            return [_opened_row(query, row, sealer, refs) for row in rows]
        except UnknownDataKey as unknown:
            if attempt == 2:
                raise StoreError(f"the store has no data key {unknown.key_id!r}") from None
            sealer.learn((yield Query("data_keys")))  # written by another process since this one looked
    raise AssertionError("unreachable")  # pragma: no cover


def _opened_row(query: Query, row: Row, sealer: Sealer, refs: dict[int, str]) -> Row:
    values = dict(zip(row.columns, row, strict=True))
    if "run_id" in values:
        run_id = values["run_id"]
    elif "run_ref" in values and values["run_ref"] in refs:
        run_id = refs[values["run_ref"]]
    else:
        run_id = _run_of(query.name, query.params, refs) if _needs_run(values) else ""
    step = values["step"] if type(values.get("step")) is int else query.params.get("step", RUN_WIDE)
    plain_digest = None
    for column in _STEP_COLUMNS:
        if values.get(column) is not None:
            values[column] = sealer.open(values[column], run_id, step, column)
    if values.get("header") and "digest" in values:
        # The row's stored digest is keyed; the operation verifies the plain one.
        plain_digest = codec.digest(values["header"])
        stored = bytes(values["digest"])
        if sealer.keyed(plain_digest) == stored:
            values["digest"] = plain_digest
            if values.get("head_digest") is not None and bytes(values["head_digest"]) == stored:
                values["head_digest"] = plain_digest
    for key in ("digest", "head_digest"):
        if key in values and isinstance(values[key], bytes | memoryview) and values[key] is not plain_digest:
            values[key] = sealer.plain(values[key])
    if values.get("labels") is not None:
        values["labels"] = sealer.open_labels(values["labels"], run_id)
    if values.get("counters") is not None:
        values["counters"] = _opened_counters(values, sealer, run_id)
    if values.get("last_error") is not None:
        values["last_error"] = sealer.open_text(values["last_error"], run_id, "last_error")
    return type(row)(values.values())


def _opened_counters(values: dict[str, Any], sealer: Sealer, run_id: str) -> str:
    counters = values["counters"]
    if isinstance(counters, bytes | memoryview):  # SQLite: the head's sealed header, whole
        header = sealer.open(counters, run_id, values["head_step"], "header")
        return codec.encode(codec.decode(header)["counters"]).decode()
    return sealer.open_json(counters, run_id, "counters")


def _needs_run(values: dict[str, Any]) -> bool:
    return any(
        values.get(column) is not None for column in (*_STEP_COLUMNS, "labels", "counters", "last_error")
    )


def _run_of(name: str, params: dict[str, Any], refs: dict[int, str]) -> str:
    run_id = params.get("run_id")
    if run_id is None:
        run_id = refs.get(params.get("run_ref"))  # type: ignore[arg-type]
    if run_id is None:
        raise StoreError(f"internal: query {name!r} carries content but its operation never named the run")
    return str(run_id)
