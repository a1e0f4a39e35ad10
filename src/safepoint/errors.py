"""Every error safepoint raises on purpose, under one root.

    SafepointError
     ├── InvalidArgument (also ValueError)     a call's argument is wrong: names which
     │    ├── InvalidCheckpoint                 a checkpoint can't be stored as given
     │    │    ├── NotJSONCompatible            e.g. ``state.items[3]: set is not JSON-compatible``
     │    │    └── SecretLeak                   the scrubber found a secret and the policy is ``raise``
     │    ├── InvalidURL                        ``open_store`` was given a URL it can't serve
     │    ├── MissingExtra (also ImportError)   an optional part's extra is missing: names the pip install
     │    └── InvalidMigrationChain             a gap, duplicate or out-of-range version in a chain
     ├── NotFound (also LookupError)           no such run, or no such step
     │    └── StoreNotFound                     a read-only open found no safepoint store at the URL
     ├── UnknownSecret (also LookupError)      a stored secret reference names a secret the resolver lacks
     ├── Conflict                              not the next step of the run (optimistic concurrency)
     ├── LeaseLost                             a worker's lease is no longer current (fenced off)
     ├── CorruptCheckpoint                     a stored checkpoint fails its digest: names run and step
     │    └── BlobCorrupt                       a blob's bytes don't match its SHA-256: names the digest
     ├── SchemaTooNew                          a stored checkpoint's schema_version is newer than the code
     ├── MigrationError                        a migration function raised: names run, step, versions
     ├── BudgetExceeded                        a run hit its token, spend or step limit
     ├── RunStatusError                        the run's status forbids the call (an action on a done run, …)
     ├── ActionMismatch                        a resumed run did not replay its interrupted action first
     └── StoreError                            the backend failed; the driver's exception is
          │                                    chained as ``__cause__``
          ├── StoreUnavailable                 transient: connection lost, server restarting or
          │                                    shutting down, disk full, a lock timeout — retry it
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
"""

from __future__ import annotations


class SafepointError(Exception):
    """Root of every error safepoint raises on purpose."""


class InvalidArgument(SafepointError, ValueError):
    """An argument to a public call is wrong; the message names which and why."""


class InvalidCheckpoint(InvalidArgument):
    """A checkpoint (or one of its fields) cannot be stored as given."""


class NotJSONCompatible(InvalidCheckpoint):
    """A value inside a checkpoint is not plain JSON data, or not storable as it is.

    ``path`` is where the value sits, e.g. ``state.items[3]``; ``reason``
    says why, naming the offending Python type but never the value: a type
    JSON lacks (set, tuple, object), a subclass of a plain type (an
    ``IntEnum`` or ``StrEnum`` member, a numpy scalar, an ``OrderedDict`` —
    it would load back as the plain type, so it is refused instead of being
    changed silently), an int outside 64 bits, NaN or infinity, a lone
    surrogate, or nesting deeper than 200 dicts and lists.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class NotFound(SafepointError, LookupError):
    """The run, or the requested step of it, does not exist."""

    def __init__(self, run_id: str, step: int | None = None) -> None:
        self.run_id = run_id
        self.step = step
        where = f"run {run_id!r}" if step is None else f"run {run_id!r} step {step}"
        super().__init__(f"{where} not found")


class StoreNotFound(NotFound):
    """``open_store(url, read_only=True)`` found no safepoint store there; nothing was created.

    Nothing at the URL (no file, no database, no schema), or a SQLite file or
    PostgreSQL schema without safepoint's tables. ``url`` is the URL as shown
    (a PostgreSQL password masked); ``run_id`` and ``step`` are None.
    """

    def __init__(self, url: str, detail: str | None = None) -> None:
        self.url = url
        self.run_id = None  # type: ignore[assignment]
        self.step = None
        SafepointError.__init__(self, f"no safepoint store at {url}" + (f": {detail}" if detail else ""))


class Conflict(SafepointError):
    """The save is not the next step of the run; nothing was written.

    Raised when another writer got there first, when a step is skipped or
    repeated, or when a new run's first checkpoint is not step 0.
    """

    def __init__(self, run_id: str, step: int, head: int | None, detail: str | None = None) -> None:
        self.run_id = run_id
        self.step = step
        self.head = head
        if detail is not None:
            pass
        elif head is None:
            detail = "the run does not exist yet, so its first checkpoint must be step 0"
        else:
            detail = f"the run is at step {head}, so only step {head + 1} can be saved"
        super().__init__(f"cannot save run {run_id!r} step {step}: {detail}")


class LeaseLost(SafepointError):
    """The caller's lease on a run is no longer current; nothing was written.

    Another worker claimed the run after this lease expired (a higher epoch),
    or the lease was released. The caller must stop working on the run.
    """

    def __init__(self, run_id: str, epoch: int, detail: str) -> None:
        self.run_id = run_id
        self.epoch = epoch
        super().__init__(f"lease on run {run_id!r} (epoch {epoch}) is lost: {detail}")


class CorruptCheckpoint(SafepointError):
    """A stored checkpoint does not match its digest (altered or torn rows),
    or a stored column it pins (status, message count, the run row's head)
    disagrees with it. ``step`` is None only when the damaged column is the
    step itself; ``detail`` names what is wrong, never a stored value."""

    def __init__(self, run_id: str, step: int | None, detail: str) -> None:
        self.run_id = run_id
        self.step = step
        self.detail = detail
        where = f"run {run_id!r}" if step is None else f"run {run_id!r} step {step}"
        super().__init__(f"{where} is corrupt: {detail}")


class InvalidURL(InvalidArgument):
    """``open_store`` was given a URL or option it cannot serve."""


class MissingExtra(InvalidArgument, ImportError):
    """An optional part of safepoint was asked for, but its extra is not installed.

    E.g. a ``postgresql://`` store without ``safepoint[postgres]``. The message
    names the command to run; ``extra`` is the extra's name and ``name`` (as on
    any ``ImportError``) the package that is missing. It is an ``ImportError``
    too, so ``import safepoint.store.postgres`` fails the way imports do.
    """

    def __init__(self, feature: str, extra: str, package: str) -> None:
        self.extra = extra
        super().__init__(f"{feature} needs the {extra!r} extra: pip install 'safepoint[{extra}]'")
        self.name = package  # ImportError's attribute; its __init__ is not the one called here


class StoreError(SafepointError):
    """The storage backend failed; the driver's exception is the ``__cause__``."""


class StoreUnavailable(StoreError):
    """The store is unavailable for now; the same call may well succeed later.

    The one transient error: raised only for a lost connection, a server
    restart or shutdown, a full disk, and a lock or statement timeout
    (SQLite busy or locked; PostgreSQL lock_not_available, serialization
    failure, deadlock). Every other ``StoreError`` — ``StoreClosed``,
    ``BlobError``, ``BlobNotFound`` — is not transient: retrying it fails the
    same way. ``committing`` is True when the error came while the commit was
    on its way, so the write may have happened; ``digest`` is then the digest
    of the checkpoint being written, when the driver knew it (the retry
    policy in ``safepoint.retrying`` compares it with the stored one).
    """

    def __init__(self, message: str, *, committing: bool = False, digest: bytes | None = None) -> None:
        self.committing = committing
        self.digest = digest
        super().__init__(message)


class StoreClosed(StoreError):
    """The store was used after ``close()``."""


class StoreCorrupt(StoreError):
    """The database itself is damaged, below any one checkpoint; not transient.

    SQLite reports a corrupt page (``database disk image is malformed``) or a
    file that is not a database; PostgreSQL a ``data_corrupted`` or
    ``index_corrupted`` error. ``where`` names the file (or the PostgreSQL
    database), never stored text. What to do next: ``safepoint verify`` on a
    copy restored from backup, or fork the runs from their last good step
    (docs/operations.md, "Damaged data").
    """

    def __init__(self, where: str, detail: str) -> None:
        self.where = where
        super().__init__(f"the store at {where} is corrupt: {detail}")


class SecretLeak(InvalidCheckpoint):
    """The scrubber found a secret and the store's policy is ``raise``; nothing was written.

    Names the field path and the rule (or registered secret name), never the value.
    """

    def __init__(self, path: str, rule: str) -> None:
        self.path = path
        self.rule = rule
        super().__init__(f"{path}: holds a secret matched by {rule!r}; refusing to store it")


class InvalidMigrationChain(InvalidArgument):
    """A migration chain is malformed: a gap, a duplicate, or a version beyond current."""


class SchemaTooNew(SafepointError):
    """A stored checkpoint was written by newer code than this (its schema_version is ahead).

    Refusing to load keeps a rolled-back deploy from resuming — and then
    overwriting — runs in a shape it does not understand.
    """

    def __init__(self, run_id: str, step: int, stored_version: int, current_version: int) -> None:
        self.run_id = run_id
        self.step = step
        self.stored_version = stored_version
        self.current_version = current_version
        super().__init__(
            f"run {run_id!r} step {step} has schema_version {stored_version}, newer than this "
            f"code's {current_version}; deploy the newer code or add the migrations up to it"
        )


class MigrationError(SafepointError):
    """A migration function failed on a stored checkpoint; the cause is chained."""

    def __init__(self, run_id: str, step: int, from_version: int, to_version: int, detail: str) -> None:
        self.run_id = run_id
        self.step = step
        self.from_version = from_version
        self.to_version = to_version
        super().__init__(
            f"run {run_id!r} step {step}: migration from schema_version {from_version} "
            f"to {to_version} failed: {detail}"
        )


class BudgetExceeded(SafepointError):
    """A run reached one of its budgets (tokens, spend or steps); the run is stopped."""

    def __init__(self, run_id: str, budget: str, limit: float, used: float) -> None:
        self.run_id = run_id
        self.budget = budget
        self.limit = limit
        self.used = used
        super().__init__(f"run {run_id!r} exceeded its {budget} budget: {used:g} used of {limit:g}")


class BlobError(StoreError):
    """The blob store failed; the underlying exception is the ``__cause__``."""


class BlobNotFound(BlobError, LookupError):
    """No blob with that digest exists in the blob store."""

    def __init__(self, digest: str, detail: str = "not in the blob store") -> None:
        self.digest = digest
        super().__init__(f"blob {digest}: {detail}")


class BlobCorrupt(CorruptCheckpoint):
    """A blob's bytes do not hash to its digest (altered on disk or torn).

    ``run_id`` and ``step`` are filled in when the blob was read for a
    checkpoint (``None`` when the blob store was used directly).
    """

    def __init__(self, digest: str, detail: str, run_id: str | None = None, step: int | None = None) -> None:
        self.digest = digest
        self.run_id = run_id  # type: ignore[assignment]
        self.step = step
        self.detail = detail
        where = f"run {run_id!r} step {step}: " if run_id is not None else ""
        SafepointError.__init__(self, f"{where}blob {digest} is corrupt: {detail}")


class UnknownSecret(SafepointError, LookupError):
    """A secret reference names a secret the registry or resolver does not have."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no value for secret {name!r}: register it or give a resolver that knows it")


class RunStatusError(SafepointError):
    """The run is not in a status that allows the call; nothing was saved."""

    def __init__(self, run_id: str, status: str, detail: str) -> None:
        self.run_id = run_id
        self.status = status
        super().__init__(f"run {run_id!r} is {status}: {detail}")


class ActionMismatch(SafepointError):
    """A resumed run's next action is not the one its crash interrupted.

    A run resumed with an action pending must take that action again, as its
    next ``action`` call (the harness then reruns or skips it as its
    reconcile hook decided), before any other action or commit. Anything else
    means the agent does not continue from its checkpoint, and the
    interrupted action would be lost or taken under another key.
    """

    def __init__(self, run_id: str, expected: str, step: int, call: int, got: str | None) -> None:
        self.run_id = run_id
        self.expected = expected
        self.got = got
        doing = "committed" if got is None else f"took action {got!r}"
        super().__init__(
            f"run {run_id!r} resumed with action {expected!r} (step {step}, call {call}) pending, "
            f"but {doing} instead of taking it again"
        )
