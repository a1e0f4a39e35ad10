"""What must hold after every step, and at the end of every example.

After every step: the listing stands and holds exactly the model's runs; each
run's history is the model's steps; every acknowledged checkpoint loads equal
to the model's (secrets per policy); each run's call journal is the model's,
entry by entry; ``verify``'s checks pass (every step
loaded as stored, its row's listed columns, the run row against the head);
no registered secret, and while encrypted no canary, in the SQLite files or
the blob folder. At the end of the example: the same search over every
column of every safepoint table in the PostgreSQL schema (``safepoint_calls``
included: its results are sealed like checkpoints) and every S3 object.
Each check is of one tenant (``ctx.world.tenant``): its handle, its files,
its rows of the tables with a tenant column, its blob namespace.
``snapshot`` is what a tenant shows, compared before and after each step of
the other tenant (machine.py).
"""

from __future__ import annotations

from typing import Any

from safepoint.store.admin import all_runs
from safepoint.store.tenants import IMPLICIT
from safepoint.tamper import checkpoint_mismatches, run_mismatches

from .context import Context, Finding, attempt, difference, observed
from .model import CANARY, SECRET_VALUE
from .world import World


def check_step(ctx: Context, *, every_run: bool = False) -> None:
    """Every invariant that is checked after each step.

    The listing, each run's history, each run row against its head and the files
    are checked whole every time; checkpoints are loaded where the step added or
    changed one in the model, and every one after a step that acts on the whole
    store (``ctx.dirty`` None) and at the end of the example (``every_run``): a
    stored checkpoint changes only through such a step, and the end's full pass
    catches one that changed anyway.
    """
    store, model = ctx.world.store, ctx.model
    listed = attempt(ctx, lambda: sorted(info.run_id for info in all_runs(store)), "runs()")
    if listed.error is not None:
        raise Finding(f"runs() fails the whole listing: {type(listed.error).__name__}: {listed.error}")
    if listed.value != sorted(model.runs):
        raise Finding(f"runs() lists {listed.value}; the model holds {sorted(model.runs)}")
    resolve = model.policy == "reference"
    for run_id, run in sorted(model.runs.items()):
        history = attempt(ctx, lambda rid=run_id: store.history(rid), f"history({run_id!r})")
        if history.error is not None:
            raise Finding(f"history({run_id!r}) raised {type(history.error).__name__}: {history.error}")
        if [info.step for info in history.value] != sorted(run.checkpoints):
            shown = [info.step for info in history.value]
            raise Finding(f"history({run_id!r}) is {shown}; the model's steps are {sorted(run.checkpoints)}")
        for info in history.value:
            step = info.step
            if not every_run and ctx.dirty is not None and (run_id, step) not in ctx.dirty:
                continue
            loaded = attempt(
                ctx,
                lambda rid=run_id, s=step: store.load(rid, s, resolve_secrets=resolve),
                f"load({run_id!r}, {step})",
            )
            if loaded.error is not None:
                raise Finding(
                    f"load({run_id!r}, {step}) raised {type(loaded.error).__name__}: {loaded.error}"
                )
            want = model.expected(run.checkpoints[step])
            got = observed(loaded.value)
            if got != want:
                raise Finding(f"load({run_id!r}, {step}) differs from the model: {difference(got, want)}")
            # verify: the checkpoint as stored, against its row's listed columns
            # Blobs were fetched and verified by the load above.
            raw = attempt(
                ctx, lambda rid=run_id, s=step: store.load(rid, s, migrate=False, fetch_blobs=False), "verify"
            )
            if raw.error is not None:
                raise Finding(f"verify: ({run_id!r}, {step}) {type(raw.error).__name__}: {raw.error}")
            if checkpoint_mismatches(info, raw.value):
                raise Finding(f"verify: ({run_id!r}, {step}) {checkpoint_mismatches(info, raw.value)}")
        head = attempt(
            ctx, lambda rid=run_id: store.load(rid, migrate=False, fetch_blobs=False), "verify head"
        )
        row = attempt(ctx, lambda rid=run_id: store.run(rid), f"run({run_id!r})")
        if head.error is not None or row.error is not None:
            raise Finding(f"verify: the head or run row of {run_id!r} cannot be read")
        mismatches = run_mismatches(row.value, head.value)
        if mismatches or row.value.status != run.status:
            raise Finding(
                f"verify: run row of {run_id!r}: {mismatches} (status {row.value.status}, model {run.status})"
            )
    check_calls(ctx, every_run=every_run)
    for path in ctx.world.files():
        data = path.read_bytes()
        _search(ctx, data, str(path.name))


def snapshot(ctx: Context) -> dict[str, Any]:
    """What the tenant's handle shows, headers only, by run: its run row (as listed), its history
    (each step's digest covers the checkpoint as stored), its queue state and its call journal.
    Compared before and after a step of the other tenant: nothing of it may differ."""
    store = ctx.world.store
    try:
        listed = sorted(all_runs(store), key=lambda info: info.run_id)
        return {
            info.run_id: (
                info,
                store.history(info.run_id),
                store.queue_state(info.run_id),
                store.recorded_calls(info.run_id, resolve_secrets=False),
            )
            for info in listed
        }
    except Exception as exc:
        raise Finding(f"reading what tenant {ctx.world.tenant!r} shows raised {type(exc).__name__}") from exc


def check_calls(ctx: Context, *, every_run: bool = False) -> None:
    """Each run's call journal is the model's, exactly: every entry's key, state, step, result
    (secrets resolved as the policy allows), usage and writer — for the runs whose journal the
    last step changed, and every run after a step on the whole store and at the end."""
    store, model = ctx.world.store, ctx.model
    resolve = model.policy == "reference"
    wanted = sorted(model.runs) if every_run or ctx.calls_dirty is None else sorted(ctx.calls_dirty)
    for run_id in wanted:
        run = model.runs.get(run_id)
        if run is None:
            continue  # deleted: the listing says it is gone
        listed = attempt(
            ctx,
            lambda rid=run_id: store.recorded_calls(rid, resolve_secrets=resolve),
            f"recorded_calls({run_id!r})",
        )
        if listed.error is not None:
            raise Finding(f"recorded_calls({run_id!r}) raised {type(listed.error).__name__}: {listed.error}")
        got = {entry.key: entry for entry in listed.value}
        if sorted(got) != sorted(run.calls):
            extra, missing = sorted(set(got) - set(run.calls)), sorted(set(run.calls) - set(got))
            raise Finding(
                f"recorded_calls({run_id!r}): {len(extra)} entries the model lacks, {len(missing)} missing"
                f" (keys of length {[len(k) for k in extra]} / {[len(k) for k in missing]})"
            )
        for key, call in run.calls.items():
            entry = got[key]
            used = entry.usage
            usage = None if used is None else (used.tokens_in, used.tokens_out, used.spend)
            have = (entry.state, entry.step, entry.writer, entry.epoch, usage)
            want = (call.state, call.step, call.writer, call.epoch, call.usage)
            if have != want or entry.result != model.expected_result(call.result):
                raise Finding(
                    f"recorded_calls({run_id!r}): an entry (key of length {len(key)}) differs from the"
                    f" model: (state, step, writer, epoch, usage) {have}, the model {want}"
                    + ("" if entry.result == model.expected_result(call.result) else "; its result differs")
                )


def check_end(ctx: Context) -> None:
    """At the end of an example: PostgreSQL's rows and the S3 objects, searched like the files."""
    recorded = sum(len(run.calls) for run in ctx.model.runs.values())
    tables = _search_outside_files(ctx, ctx.world, encrypted=ctx.model.encrypted)
    if ctx.world.schema is not None and recorded and "safepoint_calls" not in tables:
        raise Finding("the search read no row of safepoint_calls, where the model has entries")


def search_world(ctx: Context, world: World) -> None:
    """Another store of the example (an import's): its files, PostgreSQL rows and S3 objects,
    searched as the main store's are (a canary only where that store is encrypted)."""
    encrypted = world.keyring_text is not None
    for path in world.files():
        _search(ctx, path.read_bytes(), f"{path.name} of the other store", encrypted=encrypted)
    _search_outside_files(ctx, world, encrypted=encrypted)


def _search_outside_files(ctx: Context, world: World, *, encrypted: bool) -> set[str]:
    """The world's tenant's PostgreSQL rows and S3 objects, searched; the tables that held rows."""
    tables: set[str] = set()
    if world.schema is not None:
        for table, data in _postgres_rows(world.url, world.schema, world.tenant):
            tables.add(table)
            _search(ctx, data, f"PostgreSQL table {table}", encrypted=encrypted)
    for key, body in s3_objects(world):
        _search(ctx, body, f"S3 object {key}", encrypted=encrypted)
    return tables


def s3_objects(world: World) -> list[tuple[str, bytes]]:
    """The world's tenant's S3 objects (none unless its blobs go to S3), by key: under its
    namespace — for the implicit tenant, the prefix's own objects, not ``tenants/…``."""
    if world.config.blobs != "s3":
        return []
    from .world import s3_client  # noqa: PLC0415

    client = s3_client()
    prefix = world.s3_keys_prefix()
    out = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket="safepoint-model", Prefix=prefix):
        for item in page.get("Contents", []):
            if world.tenant == IMPLICIT and item["Key"][len(prefix) :].startswith("tenants/"):
                continue  # a named tenant's namespace, under the implicit tenant's prefix
            body = client.get_object(Bucket="safepoint-model", Key=item["Key"])["Body"].read()
            out.append((item["Key"], body))
    return out


def _search(ctx: Context, data: bytes, where: str, *, encrypted: bool | None = None) -> None:
    if SECRET_VALUE.encode() in data:
        raise Finding(f"the registered secret is stored in plain text in {where}")
    sealed = ctx.model.encrypted if encrypted is None else encrypted
    if sealed and CANARY.encode() in data:
        raise Finding(f"the store is encrypted, yet a canary is in plain text in {where}")


def _postgres_rows(dsn: str, schema: str, tenant: str | None = None) -> list[tuple[str, bytes]]:
    """Every column of every safepoint table in ``schema``, as bytes (bytea as is, the rest as
    text): with ``tenant``, only that tenant's rows of each table that has a tenant column (and
    every row of the store-wide tables). The connection is the test's superuser: row-level
    security does not apply to it, the filter does."""
    import psycopg  # noqa: PLC0415
    from psycopg import sql  # noqa: PLC0415

    out: list[tuple[str, bytes]] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT table_name, bool_or(column_name = 'tenant') FROM information_schema.columns"
            " WHERE table_schema = %s AND table_name LIKE 'safepoint%%' GROUP BY table_name",
            (schema,),
        ).fetchall()
        for table, tenanted in tables:
            query = sql.SQL("SELECT * FROM {}.{}").format(sql.Identifier(schema), sql.Identifier(table))
            if tenant is not None and tenanted:
                query = query + sql.SQL(" WHERE tenant = {}").format(sql.Literal(tenant))
            rows = conn.execute(query)
            for row in rows.fetchall():
                for value in row:
                    out.append((table, _as_bytes(value)))
    return out


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes | memoryview | bytearray):
        return bytes(value)
    return str(value).encode()
