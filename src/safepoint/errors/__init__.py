"""Every error safepoint raises on purpose, under one root.

    SafepointError
     ├── InvalidArgument (also ValueError)     a call's argument is wrong: names which
     │    ├── InvalidCheckpoint                 a checkpoint can't be stored as given
     │    │    ├── NotJSONCompatible            e.g. ``state.items[3]: set is not JSON-compatible``
     │    │    └── SecretLeak                   the scrubber found a secret and the policy is ``raise``
     │    ├── InvalidURL                        ``open_store`` was given a URL it can't serve
     │    ├── InvalidKey                        a key or keyring source is malformed, or not the store's key
     │    ├── NotEncrypted                      a keyring for a store that is not encrypted (read-only)
     │    ├── MissingExtra (also ImportError)   an optional part's extra is missing: names the pip install
     │    └── InvalidMigrationChain             a gap, duplicate or out-of-range version in a chain
     ├── NotFound (also LookupError)           no such run, or no such step
     │    └── StoreNotFound                     a read-only open found no safepoint store at the URL
     ├── UnknownSecret (also LookupError)      a stored secret reference names a secret the resolver lacks
     ├── MissingKey (also LookupError)         stored data needs a key id the keyring lacks: names the id
     │    └── EncryptedStore                    the store is encrypted and was opened without a keyring
     ├── Conflict                              not the next step of the run (optimistic concurrency)
 │    └── RunHeld                           another live writer holds the run (an open Run, a
 │                                          worker): names the run and until when, not the holder
     ├── LeaseLost                             a worker's lease is no longer current (fenced off)
     ├── CorruptCheckpoint                     a stored checkpoint fails its digest: names run and step
     │    ├── BlobCorrupt                       a blob's bytes don't match its SHA-256: names the digest
     │    └── CorruptCall                       a recorded call fails its digest or does not open for
     │                                          its place: names run, step and the key (escaped)
     ├── SchemaTooNew                          a stored checkpoint's schema_version is newer than the code
     ├── MigrationError                        a migration function raised: names run, step, versions
     ├── BudgetExceeded                        a run hit its token, spend or step limit
     ├── RunStatusError                        the run's status forbids the call (an action on a done run, …)
     ├── ActionMismatch                        a resumed run did not replay its interrupted action first
     └── StoreError                            the backend failed; the driver's exception is
          │                                    chained as ``__cause__``
          ├── StoreUnavailable                 transient: connection lost, server restarting or
          │                                    shutting down, disk full, a lock timeout — retry it
          ├── StoreReadOnly                    a write where the store takes none: a read-only
          │                                    open, or a PostgreSQL hot standby — not transient
          ├── StoreClosed                      the store was used after ``close()``
          ├── StoreCorrupt                     the database itself is damaged (a corrupt page,
          │                                    not a database file): names the file or schema
          └── BlobError                        the blob store failed (I/O, permissions, network)
               └── BlobNotFound (also LookupError)  no blob with that digest

Messages never contain stored values, only names, paths, run ids and steps, so
an error can be logged without leaking what the checkpoint held. Arguments out
of range (a step, a limit, a lease, a cursor) are named with their bounds, not
quoted. A dict key inside a path is shown with control and format characters
escaped, and by its position (``state[<key #3>]``) when it is longer than 40
characters; a path longer than 200 characters keeps its two ends. Errors from
a driver are chained as ``__cause__`` — except where the driver's text can
hold a secret (a PostgreSQL connection failure quotes parts of the URL): then
the cause is a copy of the driver's error holding only a safe summary.

Bounds the store enforces (``InvalidArgument`` / ``InvalidCheckpoint``):
``step`` 0 to 2**31 - 1, ``schema_version`` 1 to 2**31 - 1, ``runs(limit=)``
1 to 10,000, leases and heartbeat extensions up to 365 days, GC grace and
retention durations up to 36,500 days; values nest at most 200 dicts and lists
deep (``codec.MAX_DEPTH``).

Import every error from here (or ``safepoint``). They are defined by where
they come from: ``input`` (a call's arguments), ``store`` (the store's answers
and its backend's failures), ``loading`` (stored data that is damaged or
cannot be lifted), ``harness`` (the running agent), under ``base``'s root.
"""

from __future__ import annotations

from .base import SafepointError
from .harness import ActionMismatch, BudgetExceeded, RunStatusError
from .input import (
    InvalidArgument,
    InvalidCheckpoint,
    InvalidKey,
    InvalidMigrationChain,
    InvalidURL,
    MissingExtra,
    NotEncrypted,
    NotJSONCompatible,
    SecretLeak,
)
from .loading import (
    BlobCorrupt,
    CorruptCall,
    CorruptCheckpoint,
    EncryptedStore,
    MigrationError,
    MissingKey,
    SchemaTooNew,
    UnknownSecret,
)
from .store import (
    BlobError,
    BlobNotFound,
    Conflict,
    LeaseLost,
    NotFound,
    RunHeld,
    StoreClosed,
    StoreCorrupt,
    StoreError,
    StoreNotFound,
    StoreReadOnly,
    StoreUnavailable,
)

__all__ = [
    "ActionMismatch",
    "BlobCorrupt",
    "BlobError",
    "BlobNotFound",
    "BudgetExceeded",
    "Conflict",
    "CorruptCall",
    "CorruptCheckpoint",
    "EncryptedStore",
    "InvalidArgument",
    "InvalidCheckpoint",
    "InvalidKey",
    "InvalidMigrationChain",
    "InvalidURL",
    "LeaseLost",
    "MigrationError",
    "MissingExtra",
    "MissingKey",
    "NotEncrypted",
    "NotFound",
    "NotJSONCompatible",
    "RunHeld",
    "RunStatusError",
    "SafepointError",
    "SchemaTooNew",
    "SecretLeak",
    "StoreClosed",
    "StoreCorrupt",
    "StoreError",
    "StoreNotFound",
    "StoreReadOnly",
    "StoreUnavailable",
    "UnknownSecret",
]
