"""safepoint: checkpoints that make AI-agent runs survivable.

>>> import safepoint
>>> store = safepoint.open_store("memory://")
>>> cp = safepoint.Checkpoint(run_id="demo")
>>> cp.messages.append({"role": "user", "content": "hi"})
>>> _ = store.save(cp)
>>> store.load("demo").messages
[{'content': 'hi', 'role': 'user'}]
"""

from __future__ import annotations

from .errors import (
    BlobCorrupt,
    BlobError,
    BlobNotFound,
    BudgetExceeded,
    Conflict,
    CorruptCheckpoint,
    InvalidArgument,
    InvalidCheckpoint,
    InvalidMigrationChain,
    InvalidURL,
    LeaseLost,
    MigrationError,
    NotFound,
    NotJSONCompatible,
    SafepointError,
    SchemaTooNew,
    SecretLeak,
    StoreClosed,
    StoreError,
    UnknownSecret,
)
from .migrations import MigrationChain
from .model import (
    Checkpoint,
    CheckpointInfo,
    Lease,
    Page,
    ParentRef,
    RunInfo,
    ScrubReport,
    Status,
    new_run_id,
)
from .scrub import Scrubber, Secrets
from .store import DEFAULT_URL, AsyncStore, Store, open_async_store, open_store
from .worker import Job, Worker

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_URL",
    "AsyncStore",
    "BlobCorrupt",
    "BlobError",
    "BlobNotFound",
    "BudgetExceeded",
    "Checkpoint",
    "CheckpointInfo",
    "Conflict",
    "CorruptCheckpoint",
    "InvalidArgument",
    "InvalidCheckpoint",
    "InvalidMigrationChain",
    "InvalidURL",
    "Job",
    "Lease",
    "LeaseLost",
    "MigrationChain",
    "MigrationError",
    "NotFound",
    "NotJSONCompatible",
    "Page",
    "ParentRef",
    "RunInfo",
    "SafepointError",
    "SchemaTooNew",
    "ScrubReport",
    "Scrubber",
    "SecretLeak",
    "Secrets",
    "Status",
    "Store",
    "StoreClosed",
    "StoreError",
    "UnknownSecret",
    "Worker",
    "__version__",
    "new_run_id",
    "open_async_store",
    "open_store",
]
