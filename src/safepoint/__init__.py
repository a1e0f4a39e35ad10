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

from .crypto.keyring import Keyring
from .errors import (
    ActionMismatch,
    BlobCorrupt,
    BlobError,
    BlobNotFound,
    BudgetExceeded,
    Conflict,
    CorruptCheckpoint,
    EncryptedStore,
    InvalidArgument,
    InvalidCheckpoint,
    InvalidKey,
    InvalidMigrationChain,
    InvalidURL,
    LeaseLost,
    MigrationError,
    MissingExtra,
    MissingKey,
    NotEncrypted,
    NotFound,
    NotJSONCompatible,
    RunHeld,
    RunStatusError,
    SafepointError,
    SchemaTooNew,
    SecretLeak,
    StoreClosed,
    StoreCorrupt,
    StoreError,
    StoreNotFound,
    StoreUnavailable,
    UnknownSecret,
)
from .harness import AsyncRun, Budget, PendingAction, Reconcile, Run, idempotency_key
from .migrations import MigrationChain
from .model import Checkpoint, ParentRef, ScrubReport, Status, new_run_id
from .records import CheckpointInfo, Lease, Page, Retention, RunInfo
from .refs import BlobLink, ScrubbedText, SecretRef
from .scrub import Scrubber, Secrets
from .store import DEFAULT_URL, AsyncStore, Store, open_async_store, open_store
from .worker import Job, Worker

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_URL",
    "ActionMismatch",
    "AsyncRun",
    "AsyncStore",
    "BlobCorrupt",
    "BlobError",
    "BlobLink",
    "BlobNotFound",
    "Budget",
    "BudgetExceeded",
    "Checkpoint",
    "CheckpointInfo",
    "Conflict",
    "CorruptCheckpoint",
    "EncryptedStore",
    "InvalidArgument",
    "InvalidCheckpoint",
    "InvalidKey",
    "InvalidMigrationChain",
    "InvalidURL",
    "Job",
    "Keyring",
    "Lease",
    "LeaseLost",
    "MigrationChain",
    "MigrationError",
    "MissingExtra",
    "MissingKey",
    "NotEncrypted",
    "NotFound",
    "NotJSONCompatible",
    "Page",
    "ParentRef",
    "PendingAction",
    "Reconcile",
    "Retention",
    "Run",
    "RunHeld",
    "RunInfo",
    "RunStatusError",
    "SafepointError",
    "SchemaTooNew",
    "ScrubReport",
    "ScrubbedText",
    "Scrubber",
    "SecretLeak",
    "SecretRef",
    "Secrets",
    "Status",
    "Store",
    "StoreClosed",
    "StoreCorrupt",
    "StoreError",
    "StoreNotFound",
    "StoreUnavailable",
    "UnknownSecret",
    "Worker",
    "__version__",
    "idempotency_key",
    "new_run_id",
    "open_async_store",
    "open_store",
]
