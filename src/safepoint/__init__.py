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

from . import errors
from .crypto.keyring import Keyring
from .errors import *  # noqa: F403  # every error of the tree (safepoint.errors.__all__), at the top too
from .harness import AsyncRun, Budget, PendingAction, Reconcile, Run, idempotency_key
from .migrations import MigrationChain
from .model import Checkpoint, ParentRef, ScrubReport, Status, new_run_id
from .records import CheckpointInfo, Lease, Page, Retention, RunInfo
from .refs import BlobLink, ScrubbedText, SecretRef
from .scrub import Scrubber, Secrets
from .store import DEFAULT_URL, AsyncStore, Store, open_async_store, open_store
from .store.redaction import Redaction
from .version import __version__
from .worker import Job, Worker

__all__ = [
    "DEFAULT_URL",
    "AsyncRun",
    "AsyncStore",
    "BlobLink",
    "Budget",
    "Checkpoint",
    "CheckpointInfo",
    "Job",
    "Keyring",
    "Lease",
    "MigrationChain",
    "Page",
    "ParentRef",
    "PendingAction",
    "Reconcile",
    "Redaction",
    "Retention",
    "Run",
    "RunInfo",
    "ScrubReport",
    "ScrubbedText",
    "Scrubber",
    "SecretRef",
    "Secrets",
    "Status",
    "Store",
    "Worker",
    "__version__",
    "idempotency_key",
    "new_run_id",
    "open_async_store",
    "open_store",
]
__all__ += errors.__all__  # every error, so a caller catches any of them as safepoint.<Name>
