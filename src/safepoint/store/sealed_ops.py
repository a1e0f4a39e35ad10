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
               (a listing's filter: tokens;
               ``hidden``: tokens of each set)
counters       a sealed JSON string (run)          opened (SQLite: from the
                                                   sealed header it returns)
error          sealed text (run): last_error       -- (``last_error``: opened)
digest         keyed, when bytes (a checkpoint's)  the plain digest again
head_digest    keyed                               the plain digest again
result         sealed (run, step, "call:" + key)   opened (run, row's step and key); its
                                                   keyed digest given back plain
request        keyed (a call's request digest)     -- (compared in SQL)
=============  ==================================  ==========================

The run a value belongs to is the query's ``run_id``; a query that names
its run by ``run_ref`` gets the id an earlier query of the same operation
paired with that ref. The step is the row's own ``step`` column, else the
query's ``step``. Blobs are sealed by their target (``sealed_blobs.py``),
not here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from safepoint import codec
from safepoint.errors import CorruptCheckpoint, MissingKey, StoreError

from .call_values import entry_digest
from .query import UNSUPPORTED, Op, Query, Row, Unopened
from .query_specs import QUERY_SPECS
from .sealed_counts import opened_counts
from .sealer import RUN_WIDE, Sealer, UnknownDataKey

T = TypeVar("T")

_STEP_COLUMNS = ("header", "messages", "chains")
_BYTES = (bytes, bytearray, memoryview)  # a tuple made once (``a | b`` builds a union on every call)
_DIGESTS = (bytes, memoryview)  # what a digest column is read as
_RESULT_COLUMNS = frozenset(
    {*_STEP_COLUMNS, "labels", "counters", "last_error", "digest", "head_digest", "result"}
)


def sealed(op: Op[T], sealer: Sealer, capabilities: frozenset[str] = frozenset()) -> Op[T]:
    """``op`` with its content sealed for the driver and opened for itself.

    ``capabilities``: the driver's optional queries; any other optional query
    is answered ``UNSUPPORTED`` here, as the driver would, before anything in
    it is sealed for nothing (SQLite's saves ask for ``save_next`` first).
    """
    refs: dict[int, str] = {}
    answer: Any = None
    try:
        while True:
            try:
                query = op.send(answer)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            if query.optional and query.name not in capabilities:
                answer = UNSUPPORTED
                continue
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
    params = _sealed_params(query.name, query.params, sealer, refs)
    # A query with nothing to seal (a load's) goes as it is: no second Query made per query.
    return query if params is query.params else Query(query.name, params, None, query.optional)


def _sealed_params(name: str, params: dict[str, Any], sealer: Sealer, refs: dict[int, str]) -> dict[str, Any]:
    found = _CONTENT_PARAMS.get(name)
    if found is None:  # the content parameters this query declares (its SQL uses no other)
        declared = tuple(p for p in QUERY_SPECS[name].params if p in _PARAM_NAMES)
        found = _CONTENT_PARAMS[name] = (declared, tuple(sorted(_PARAM_NAMES.difference(declared))))
    content, undeclared = found
    if not content and _PARAM_NAMES.isdisjoint(params):
        return params
    # The parameters one dict carries for several queries of a save: only a declared one is
    # sealed and sent; the others are dropped, so plaintext never goes where it is not used.
    out = params.copy()
    for key in undeclared:
        if key in out:
            del out[key]
    columns: list[tuple[str, bytes]] = []  # the row's bytes columns, sealed together below
    for key in content:
        value = out.get(key)
        if value is None:
            continue
        if key in _STEP_COLUMNS:
            if key != "header" or len(value):  # a pruned row's header is empty: nothing to hide
                columns.append((key, bytes(value)))
        elif key in ("digest", "head_digest", "request"):
            if isinstance(value, _BYTES):  # a checkpoint's digest (a blob's is text)
                out[key] = sealer.keyed(bytes(value))
        elif key == "result":  # a journal entry's: bound to its key as well as its run and step
            place = "call:" + params["key"]
            out[key] = sealer.seal(bytes(value), _run_of(name, params, refs), params["step"], place)
        elif key == "labels":
            run = None if name in _FILTERS else _run_of(name, params, refs)
            out[key] = sealer.wanted_labels(value) if run is None else sealer.seal_labels(value, run)
        elif key == "hidden":  # label sets whose runs a sum leaves out: matched as the filter is
            out[key] = codec.encode([sealer.tokens(rule) for rule in codec.decode(value)]).decode()
        elif key == "counters":
            out[key] = sealer.seal_json(value, _run_of(name, params, refs), "counters")
        elif key == "error":
            out[key] = sealer.seal_text(value, _run_of(name, params, refs), "last_error")
    if columns:
        sealed = sealer.seal_columns(columns, _run_of(name, params, refs), params["step"])
        for (key, _), value in zip(columns, sealed, strict=True):
            out[key] = value
    return out


# Per query: the content parameters it declares, and the others (dropped from its parameters).
_CONTENT_PARAMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
_PARAM_NAMES = frozenset(
    {*_STEP_COLUMNS, "labels", "hidden", "counters", "error", "digest", "head_digest", "result", "request"}
)
# Queries whose ``labels`` is a filter, matched through the blind index.
_FILTERS = frozenset({"list_runs", "list_runs_sorted", "run_counters"})


def _opened(query: Query, rows: list[Row], sealer: Sealer, refs: dict[int, str]) -> Op[list[Row]]:
    columns = rows[0].columns
    run_id = query.params.get("run_id")
    if run_id is not None and "run_ref" in columns:
        for row in rows:
            if row.run_ref is not None:
                refs[row.run_ref] = run_id
    if _RESULT_COLUMNS.isdisjoint(columns):
        return rows
    digests = _DIGEST_ONLY.get(columns)
    if digests is None:
        content = [i for i, c in enumerate(columns) if c in _RESULT_COLUMNS]
        only = all(columns[i] in ("digest", "head_digest") for i in content)
        digests = _DIGEST_ONLY[columns] = tuple(content) if only else ()
    if digests:  # a save's run_head: its keyed digests given back plain, nothing to open
        plain, make = sealer.plain, type(rows[0])
        given = []
        for row in rows:
            values = list(row)
            for i in digests:
                if isinstance(values[i], _DIGESTS):
                    values[i] = plain(values[i])
            given.append(make(values))
        return given
    carried = _carried_columns(columns)
    lists: list[list[Any]] = []
    if carried is not None:  # a load's carrier rows, one per step: opened in place (``Sealer.open_rows``)
        make = type(rows[0])
        lists = list(map(list, rows))
        rows.clear()  # the sealed values are in ``lists`` alone now: each goes as it is opened
    done: dict[int, list[int]] = {}  # per content column, how many rows are opened
    for attempt in (1, 2):
        try:
            if carried is not None:
                _opened_carriers(query, lists, carried, sealer, refs, done=done)
                return list(map(make, lists))
            if query.name == "run_counters":  # every run of the store: opened by position
                return opened_counts(rows, sealer)
            if query.name in _LISTINGS:
                return [_listed_row(query, row, sealer, refs) for row in rows]
            return [_opened_row(query, row, sealer, refs) for row in rows]
        except UnknownDataKey as unknown:
            if attempt == 2:
                raise StoreError(f"the store has no data key {unknown.key_id!r}") from None
            sealer.learn((yield Query("data_keys")))  # written by another process since this one looked
    raise AssertionError("unreachable")  # pragma: no cover


# Listing is not loading: a row of these that does not open comes back with its content
# columns as ``Unopened`` (the operation lists its run as unreadable, or verify names the
# journal entry that does not open); the others still open.
_LISTINGS = frozenset({"list_runs", "list_runs_sorted", "run_counters", "calls_stored"})


def _listed_row(query: Query, row: Row, sealer: Sealer, refs: dict[int, str]) -> Row:
    try:
        return _opened_row(query, row, sealer, refs)
    except (CorruptCheckpoint, MissingKey) as exc:  # not UnknownDataKey: _opened reads the keys again
        unopened = Unopened(type(exc).__name__)
        return type(row)(
            unopened if column in _RESULT_COLUMNS else value
            for column, value in zip(row.columns, row, strict=True)
        )


def _opened_row(query: Query, row: Row, sealer: Sealer, refs: dict[int, str]) -> Row:
    head = _opened_head(row, sealer, refs)
    if head is not None:
        return head
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
    if values.get("result") is not None:
        values["result"] = sealer.open(values["result"], run_id, values["step"], "call:" + values["key"])
        if values.get("digest") is not None:  # keyed when written; the operation checks the plain one
            plain_digest = entry_digest(values["key"], values["result"])
            if sealer.keyed(plain_digest) == bytes(values["digest"]):
                values["digest"] = plain_digest
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


def _opened_head(row: Row, sealer: Sealer, refs: dict[int, str]) -> Row | None:
    """``_opened_row`` of a row whose only content is a header and its digests (a load's
    ``checkpoint_latest`` or ``checkpoint_at``), by column index: what the general way does,
    without its dict and its checks of columns the row has not. None for any other row, or
    one this way does not fit (the general way then names what is wrong)."""
    columns = row.columns
    if columns not in _HEADS:
        _HEADS[columns] = _head_indexes(columns)
    at = _HEADS[columns]
    if at is None:
        return None
    header_at, digest_at, head_at, step_at, ref_at = at
    header, step, run_id = row[header_at], row[step_at], refs.get(row[ref_at])
    if header is None or type(step) is not int or run_id is None:
        return None
    values = list(row)
    values[header_at] = opened = sealer.open(header, run_id, step, "header")
    plain_digest = None
    if opened:  # the stored digest is keyed; the operation verifies the plain one
        plain_digest = codec.digest(opened)
        stored = bytes(values[digest_at])
        if sealer.keyed(plain_digest) == stored:
            values[digest_at] = plain_digest
            if head_at is not None and values[head_at] is not None and bytes(values[head_at]) == stored:
                values[head_at] = plain_digest
    for index in (digest_at, head_at):
        if index is not None:
            value = values[index]
            if isinstance(value, bytes | memoryview) and value is not plain_digest:
                values[index] = sealer.plain(value)
    return type(row)(values)


def _head_indexes(columns: tuple[str, ...]) -> tuple[int, int, int | None, int, int] | None:
    """For ``_opened_head``: the indexes of header, digest, head digest (None: no such column),
    step and run_ref, when the row's content columns are those alone and it names its run by ref."""
    content = {c for c in columns if c in _RESULT_COLUMNS}
    if not {"header", "digest"} <= content <= {"header", "digest", "head_digest"}:
        return None
    if "run_id" in columns or "step" not in columns or "run_ref" not in columns:
        return None
    head = columns.index("head_digest") if "head_digest" in content else None
    index = columns.index
    return (index("header"), index("digest"), head, index("step"), index("run_ref"))


# Result columns -> ``_head_indexes`` of them (None: not such a row).
_HEADS: dict[tuple[str, ...], tuple[int, int, int | None, int, int] | None] = {}


def _carried_columns(columns: tuple[str, ...]) -> tuple[int, tuple[tuple[int, str], ...]] | None:
    """For rows whose only content is step-bound bytes (messages, chains) beside their ``step``:
    the step's index and each such column's; None for any other rows."""
    found = _CARRIED.get(columns)
    if found is None and columns not in _CARRIED:
        content = [(i, c) for i, c in enumerate(columns) if c in _RESULT_COLUMNS]
        lean = "step" in columns and all(c in ("messages", "chains") for _, c in content)
        found = _CARRIED[columns] = (columns.index("step"), tuple(content)) if lean else None
    return found


_CARRIED: dict[tuple[str, ...], tuple[int, tuple[tuple[int, str], ...]] | None] = {}
# Queries whose rows only speed an operation up (``chain_view``: a save's shortcut past the
# bodies): a value there that does not open reads as missing, as a damaged one does on a plain
# store, and the operation falls back to the bodies, which are verified.
_HINTS = frozenset({"view_chains"})
# Result columns -> the indexes of its digests, when they are its only content (else empty).
_DIGEST_ONLY: dict[tuple[str, ...], tuple[int, ...]] = {}


def _opened_carriers(
    query: Query,
    rows: list[list[Any]],
    carried: tuple[int, tuple[tuple[int, str], ...]],
    sealer: Sealer,
    refs: dict[int, str],
    *,
    done: dict[int, list[int]],
) -> None:
    run_id = _run_of(query.name, query.params, refs)
    step_at, content = carried
    for index, column in content:
        try:
            opened = done.setdefault(index, [0])
            sealer.open_rows(rows, index, step_at, run_id=run_id, column=column, done=opened)
        except CorruptCheckpoint:
            if query.name not in _HINTS:
                raise
            for values in rows:  # as if never written: the operation takes the exact way
                values[index] = None


def _opened_counters(values: dict[str, Any], sealer: Sealer, run_id: str) -> str:
    counters = values["counters"]
    if isinstance(counters, bytes | memoryview):  # SQLite: the head's sealed header, whole
        header = sealer.open(counters, run_id, values["head_step"], "header")
        return codec.encode(codec.decode(header)["counters"]).decode()
    return sealer.open_json(counters, run_id, "counters")


def _needs_run(values: dict[str, Any]) -> bool:
    return any(
        values.get(column) is not None
        for column in (*_STEP_COLUMNS, "labels", "counters", "last_error", "result")
    )


def _run_of(name: str, params: dict[str, Any], refs: dict[int, str]) -> str:
    run_id = params.get("run_id")
    if run_id is None:
        run_id = refs.get(params.get("run_ref"))  # type: ignore[arg-type]
    if run_id is None:
        raise StoreError(f"internal: query {name!r} carries content but its operation never named the run")
    return str(run_id)


def sealed_call(
    op: Op[T], rebuild: Callable[[], Op[T]] | None, sealer: Sealer, capabilities: frozenset[str]
) -> tuple[Op[T], Callable[[], Op[T]] | None]:
    """A call's operation (and its rebuild, for group commit) as an encrypted store runs them
    on a driver with ``capabilities``: their content sealed on the way to the driver and opened
    on the way back."""
    again = None if rebuild is None else (lambda: sealed(rebuild(), sealer, capabilities))
    return sealed(op, sealer, capabilities), again
