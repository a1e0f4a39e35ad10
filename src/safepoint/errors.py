"""Every error safepoint raises on purpose, under one root.

    SafepointError
     ├── InvalidArgument (also ValueError)     a call's argument is wrong: names which
     │    ├── InvalidCheckpoint                 a checkpoint can't be stored as given
     │    │    └── NotJSONCompatible            e.g. ``state.items[3]: set is not JSON-compatible``
     │    └── InvalidURL                        ``open_store`` was given a URL it can't serve
     ├── NotFound (also LookupError)           no such run, or no such step
     ├── Conflict                              not the next step of the run (optimistic concurrency)
     ├── LeaseLost                             a worker's lease is no longer current (fenced off)
     ├── CorruptCheckpoint                     a stored checkpoint fails its digest: names run and step
     └── StoreError                            the backend failed (locked too long, disk full, …);
          │                                    the driver's exception is chained as ``__cause__``
          └── StoreClosed                      the store was used after ``close()``

Messages never contain stored values, only names, paths, run ids and steps, so
an error can be logged without leaking what the checkpoint held.
"""

from __future__ import annotations


class SafepointError(Exception):
    """Root of every error safepoint raises on purpose."""


class InvalidArgument(SafepointError, ValueError):
    """An argument to a public call is wrong; the message names which and why."""


class InvalidCheckpoint(InvalidArgument):
    """A checkpoint (or one of its fields) cannot be stored as given."""


class NotJSONCompatible(InvalidCheckpoint):
    """A value inside a checkpoint is not plain JSON data.

    ``path`` is where the value sits, e.g. ``state.items[3]``; ``type_name``
    is the offending Python type.
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
    """A stored checkpoint does not match its digest (altered or torn rows)."""

    def __init__(self, run_id: str, step: int, detail: str) -> None:
        self.run_id = run_id
        self.step = step
        self.detail = detail
        super().__init__(f"run {run_id!r} step {step} is corrupt: {detail}")


class InvalidURL(InvalidArgument):
    """``open_store`` was given a URL or option it cannot serve."""


class StoreError(SafepointError):
    """The storage backend failed; the driver's exception is the ``__cause__``."""


class StoreClosed(StoreError):
    """The store was used after ``close()``."""
