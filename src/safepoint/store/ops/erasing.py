"""The operations ``erasing.erase_tenant`` runs, one transaction each, in this order.

Each deletes what it finds and reports how much, so each is idempotent: run
again after a kill it finds less, or nothing, and the erase goes on. On
PostgreSQL every query names its tenant (``current_setting('safepoint.tenant')``,
which the driver sets for the tenant it was opened for) and row-level
security admits no other tenant's rows; on SQLite the file is the tenant's.
"""

from __future__ import annotations

from dataclasses import dataclass

from safepoint.store.query import UNSUPPORTED, Op, Query

ERASING = "erasing"  # the meta row that marks a tenant being erased (encryption.py refuses to open it)
RUNS_PAGE = 100  # runs deleted per transaction
BLOBS_PAGE = 500  # blob rows deleted per transaction


@dataclass(frozen=True, slots=True)
class Held:
    """How many rows of each table the tenant holds."""

    runs: int = 0
    checkpoints: int = 0
    blobs: int = 0
    meta: int = 0
    data_keys: int = 0
    calls: int = 0
    redactions: int = 0

    @property
    def total(self) -> int:
        return sum(
            (self.runs, self.checkpoints, self.blobs, self.meta, self.data_keys, self.calls, self.redactions)
        )


def held() -> Op[Held]:
    """The tenant's rows, counted per table."""
    (row,) = yield Query("tenant_held")
    return Held(*(int(value) for value in row))


def mark_and_drop_keys() -> Op[tuple[bool, int]]:
    """The erase's first transaction: the tenant marked as being erased (no open of it succeeds
    from now on) and its data keys deleted — from then on nothing sealed of it opens, whatever
    keyring is given. Whether it was encrypted (it has a store id), and the data keys deleted."""
    meta = {row.name for row in (yield Query("store_meta"))}
    yield Query("replace_store_meta", {"name": ERASING, "value": "1"})
    scrubbing = (yield Query("secure_delete", optional=True)) is not UNSUPPORTED
    dropped = len((yield Query("erase_data_keys")))
    if scrubbing:  # SQLite: the wrapped keys' pages zeroed, and the WAL that held them cut to nothing
        yield Query("end_transaction", optional=True)
        yield Query("wal_truncate", optional=True)
        yield Query("begin_transaction", optional=True)
    return "store_id" in meta, dropped


def drop_runs(limit: int = RUNS_PAGE) -> Op[int]:
    """Up to ``limit`` of the tenant's runs deleted, each with its checkpoints, call journal and
    redaction records: how many (0 when none is left)."""
    runs = yield Query("runs_after", {"after_ref": 0, "limit": limit})
    for run in runs:
        for name in ("delete_calls", "delete_redactions", "delete_checkpoints", "delete_run"):
            yield Query(name, {"run_ref": run.run_ref})
    return len(runs)


def drop_blob_rows(limit: int = BLOBS_PAGE) -> Op[int]:
    """Up to ``limit`` of the tenant's rows in the database blob table deleted: how many."""
    return len((yield Query("erase_blobs", {"limit": limit})))


def drop_meta() -> Op[int]:
    """The tenant's meta rows (store id, index key check value, state, the erasing mark) deleted:
    the erase's last step, after which the tenant holds nothing."""
    return len((yield Query("erase_meta")))
