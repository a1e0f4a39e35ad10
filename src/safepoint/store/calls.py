"""What a store method does around its transaction: the ``Call``, and the builders that need one of their own.

A ``Call`` is the whole recipe of one public method: the work before the
transaction (validation, encoding: bad values refused before any write, locks
held briefly), slow I/O that must precede it (``before``: blob uploads), the
operation the driver runs in one transaction, and the work after commit.
``Store`` blocks on its driver, ``AsyncStore`` awaits it; neither holds logic.

The call table (``methods.py``) builds each call: there for one operation on
checked arguments (``reads``/``writes``), here when it does more around it or
runs without a store too (drivers under test, benchmarks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from safepoint.errors import InvalidArgument
from safepoint.model import Checkpoint, Status
from safepoint.model import new_run_id as make_run_id
from safepoint.records import MAX_AGE, CheckpointInfo, Page, Retention, RunInfo, now_micros

from . import arguments, sorting
from .after_load import ResolveSecrets
from .ops import collect, listing, retention
from .ops import runs as run_ops  # calls.runs is the listing call
from .ops.collect import FileSpace, GcResult
from .ops.loading import load_for_reading, read_blobs
from .ops.retention import PruneResult
from .ops.rewrite import Rewritten, rewrite_heads
from .query import Loaded, Op
from .settings import StoreSettings
from .validate import check_id, check_step, validate_fields

T = TypeVar("T")
R = TypeVar("R")


@dataclass(slots=True)
class SaveFacts:
    """What one committed save wrote, for span attributes and metrics: sizes and counts, no value.

    ``bytes_written`` counts the new message bodies and blobs (the small
    header row aside); ``findings`` the scrubber's replacements by rule.
    """

    bytes_written: int = 0
    messages_added: int = 0
    blobs_written: int = 0
    findings: dict[str, int] = field(default_factory=dict)


# Not frozen: made on every save's path, where frozen's object.__setattr__ per field costs
# more than the rest of the object (about 1.3 K instructions a field). Never changed once made.
@dataclass(slots=True)
class Call(Generic[T, R]):
    """One transaction (``op``), and what turns its result into the method's return value.

    ``before``, when set, is blocking I/O to run before the transaction
    begins (outside any lock); ``op`` stays correct if a runner skips it.
    ``written``, when set, says what the committed operation wrote; only an
    observed store asks (a save's span attributes and metrics). ``rebuild``
    makes the call a save that may share its transaction (``Driver.run_joined``).
    """

    op: Op[T]
    write: bool
    finish: Callable[[T], R]
    before: Callable[[], None] | None = None
    written: Callable[[T], SaveFacts] | None = None
    rebuild: Callable[[], Op[T]] | None = None
    weight: int = 0


def _same(value: Any) -> Any:
    return value


def reads(op: Op[T]) -> Call[T, T]:
    """A read-only call whose result is the operation's own."""
    return Call(op, False, _same)


def writes(op: Op[T]) -> Call[T, T]:
    """A writing call whose result is the operation's own."""
    return Call(op, True, _same)


def load(
    run_id: str,
    step: int | None,
    settings: StoreSettings,
    *,
    resolve_secrets: ResolveSecrets = False,
    migrate: bool = True,
    fetch_blobs: bool = True,
) -> Call[Loaded, Checkpoint]:
    def finish(loaded: Loaded) -> Checkpoint:
        return settings.after_load(loaded, migrate=migrate, resolve=resolve_secrets, fetch_blobs=fetch_blobs)

    arguments.resolver(resolve_secrets)
    arguments.flag(migrate, "migrate")
    arguments.flag(fetch_blobs, "fetch_blobs")
    in_database = settings.blobs is not None and settings.blobs.in_database and fetch_blobs
    op = load_for_reading(
        check_id(run_id), check_step(step), blobs_in_database=in_database, verified=settings.verified
    )
    return Call(op, False, finish)


def migrate_runs(run_ids: list[str], settings: StoreSettings) -> Call[Rewritten, Rewritten]:
    chain = settings.migrations
    if chain is None:
        raise InvalidArgument("eager migration needs a store opened with migrations=MigrationChain(...)")
    if not isinstance(run_ids, list | tuple):  # a str would be taken for a list of one-letter ids
        raise InvalidArgument(f"run_ids must be a list of run ids, not {type(run_ids).__name__}")
    ids = [check_id(run_id) for run_id in run_ids]

    def rewrite(head: Checkpoint) -> Checkpoint | None:
        chain.check_version(head.schema_version, run_id=head.run_id, step=head.step)
        return settings.migrate(head) if chain.needs_migration(head.schema_version) else None

    return writes(rewrite_heads(ids, rewrite, settings.prepare_save, now_micros()))


def fetch_blob(ref: Any, settings: StoreSettings) -> Call[dict[str, bytes], str | bytes]:
    parsed = settings.blob_ref(ref)
    in_database = settings.blobs is not None and settings.blobs.in_database
    digests = [parsed.digest] if in_database else []

    def finish(stored: dict[str, bytes]) -> str | bytes:
        return settings.fetch_blob(parsed, stored)

    return Call(read_blobs(digests), False, finish)


def prune_run(
    run_id: str, policy: Retention | None, settings: StoreSettings, dry_run: bool
) -> Call[PruneResult, PruneResult]:
    chosen = arguments.policy(policy) or settings.retention
    op = retention.prune_run(
        check_id(run_id), chosen, now_micros(), dry_run=arguments.flag(dry_run, "dry_run")
    )
    return Call(op, not dry_run, _same)


def collect_garbage(
    settings: StoreSettings, grace: float | timedelta, dry_run: bool
) -> Call[GcResult, GcResult]:
    if settings.blobs is None:
        raise InvalidArgument("this store has no blob store (opened with blobs=False): nothing to collect")
    wait = arguments.duration(grace, "grace", low=timedelta(0), high=MAX_AGE)
    op = collect.collect_garbage(
        settings.blobs, now_micros(), wait, dry_run=arguments.flag(dry_run, "dry_run")
    )
    # A dry run deletes nothing and takes no guard: a read-only transaction.
    return Call(op, not dry_run, _same)


def vacuum(dialect: str) -> Call[FileSpace | None, FileSpace]:
    if dialect != "sqlite":
        raise InvalidArgument(
            f"vacuum is for SQLite stores; {dialect} reuses freed space after autovacuum"
            " (VACUUM FULL is a database administrator's call)"
        )

    def finish(space: FileSpace | None) -> FileSpace:
        assert space is not None  # a SQLite file always reports its pages
        return space

    return Call(collect.vacuum_store(), True, finish)


def history(run_id: str) -> Call[list[CheckpointInfo], list[CheckpointInfo]]:
    return reads(listing.history(check_id(run_id)))


def runs(
    *,
    status: Status | str | Iterable[Status | str] | None,
    labels: dict[str, str] | None,
    updated_since: datetime | None,
    limit: int,
    cursor: str | None,
    prefix: str | None = None,
    updated_until: datetime | None = None,
    sort: str = "created",
    descending: bool = True,
) -> Call[Any, Page[RunInfo]]:
    rows, wanted = arguments.limit(limit), arguments.label_filter(labels)
    sort, descending = sorting.check_sort(sort, descending)
    filters: dict[str, Any] = {
        "statuses": None if status is None else arguments.statuses(status),
        "labels": wanted,
        "updated_since": arguments.since(updated_since),
        "updated_until": arguments.since(updated_until, "updated_until"),
        "prefix": None if prefix is None else check_id(prefix, "run_id_prefix"),
    }
    if sort == "created" and descending:  # the listing an index serves, with its short cursor
        op = listing.list_runs(**filters, before_id=arguments.decode_cursor(cursor), limit=rows)

        def newest(result: tuple[list[RunInfo], int | None]) -> Page[RunInfo]:
            items, more = result
            return Page(items, None if more is None else arguments.encode_cursor(more))

        return Call(op, False, newest)
    if cursor is not None and type(cursor) is not str:
        arguments.decode_cursor(cursor)  # refused, in the words every cursor is refused in
    after = None if cursor is None else sorting.decode(cursor, sort, descending)
    ordered = listing.list_runs_sorted(**filters, sort=sort, descending=descending, after=after, limit=rows)

    def sorted_page(result: tuple[list[RunInfo], sorting.After | None]) -> Page[RunInfo]:
        items, more = result
        return Page(items, None if more is None else sorting.encode(sort, descending, more))

    return Call(ordered, False, sorted_page)


def fork(
    run_id: str,
    step: int | None,
    new_run_id: str | None,
    labels: dict[str, str] | None,
    settings: StoreSettings,
) -> Call[Checkpoint, Checkpoint]:
    # None asks for a fresh id; an empty one is a wrong id like any other, not "no id".
    target = check_id(make_run_id() if new_run_id is None else new_run_id, "new_run_id")
    settings.guard(validate_fields, Checkpoint(run_id=target, labels={} if labels is None else labels))
    if labels is not None:  # scrubbed like any label a save writes
        labels = settings.prepare_save(Checkpoint(run_id=target, labels=labels)).fields.labels
    return writes(run_ops.fork(check_id(run_id), check_step(step), target, labels, now_micros()))
