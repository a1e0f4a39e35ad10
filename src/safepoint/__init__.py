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
    Conflict,
    CorruptCheckpoint,
    InvalidArgument,
    InvalidCheckpoint,
    InvalidURL,
    LeaseLost,
    NotFound,
    NotJSONCompatible,
    SafepointError,
    StoreClosed,
    StoreError,
)
from .model import Checkpoint, CheckpointInfo, Lease, Page, ParentRef, RunInfo, Status, new_run_id
from .store import DEFAULT_URL, AsyncStore, Store, open_async_store, open_store
from .worker import Job, Worker

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_URL",
    "AsyncStore",
    "Checkpoint",
    "CheckpointInfo",
    "Conflict",
    "CorruptCheckpoint",
    "InvalidArgument",
    "InvalidCheckpoint",
    "InvalidURL",
    "Job",
    "Lease",
    "LeaseLost",
    "NotFound",
    "NotJSONCompatible",
    "Page",
    "ParentRef",
    "RunInfo",
    "SafepointError",
    "Status",
    "Store",
    "StoreClosed",
    "StoreError",
    "Worker",
    "__version__",
    "new_run_id",
    "open_async_store",
    "open_store",
]
