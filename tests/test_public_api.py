"""The public surface: what `import safepoint` offers, and the error tree."""

from __future__ import annotations

import inspect

import safepoint
from safepoint import errors


def test_all_is_exactly_the_public_surface() -> None:
    """__all__ lists every public name, and every name in it exists."""
    expected = {
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
        "CorruptCall",
        "DEFAULT_URL",
        "InvalidArgument",
        "InvalidCheckpoint",
        "InvalidKey",
        "EncryptedStore",
        "NotEncrypted",
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
        "NotFound",
        "NotJSONCompatible",
        "Page",
        "ParentRef",
        "PendingAction",
        "Reconcile",
        "Redaction",
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
        "StoreReadOnly",
        "StoreUnavailable",
        "UnknownSecret",
        "Worker",
        "__version__",
        "idempotency_key",
        "new_run_id",
        "open_async_store",
        "open_store",
    }
    assert set(safepoint.__all__) == expected
    for name in safepoint.__all__:
        assert hasattr(safepoint, name)


def test_every_error_derives_from_safepoint_error() -> None:
    """Every exception class in safepoint.errors is under SafepointError and exported."""
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, Exception)]
    assert len(classes) >= 10
    for cls in classes:
        assert issubclass(cls, safepoint.SafepointError)
        assert cls.__name__ in safepoint.__all__


def test_errors_are_also_the_builtin_a_caller_would_catch() -> None:
    """NotFound is a LookupError; argument errors are ValueErrors."""
    assert issubclass(safepoint.NotFound, LookupError)
    assert issubclass(safepoint.InvalidArgument, ValueError)
    assert issubclass(safepoint.NotJSONCompatible, ValueError)


def test_error_tree_is_drawn_in_the_module_docstring() -> None:
    """The errors module docstring names every error class (the tree a reader sees first)."""
    doc = errors.__doc__ or ""
    for name in safepoint.__all__:
        obj = getattr(safepoint, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert name in doc
