"""What a load finds wrong with stored data: a checkpoint or blob that fails
its digest, a schema_version the code cannot lift, a migration that failed,
a secret reference nobody can resolve.

See ``safepoint.errors`` for the whole tree.
"""

from __future__ import annotations

from .base import SafepointError


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


class CorruptCall(CorruptCheckpoint):
    """A recorded call of a run's journal is damaged: its result does not match
    its digest (altered, or moved to another key), does not open for its run,
    step and key on an encrypted store (moved or altered), or is not in the
    stored form. ``key`` is the entry's key; the message shows it escaped and
    cut short (keys come from frameworks: thread ids, tool call ids), never
    the result. ``step`` is the step the entry belongs to."""

    def __init__(self, run_id: str, step: int | None, key: str, detail: str) -> None:
        self.key = key
        shown = key if len(key) <= _KEY_SHOWN else key[: _KEY_SHOWN - 1] + "\u2026"
        # repr escapes control, format and other unprintable characters (a bidi override too).
        CorruptCheckpoint.__init__(self, run_id, step, f"call {shown!r}: {detail}")
        self.detail = detail


_KEY_SHOWN = 80  # characters of a key a message shows


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


class MissingKey(SafepointError, LookupError):
    """Stored data is encrypted under a key id the keyring does not hold; names the id needed."""

    def __init__(self, key_id: str, message: str | None = None) -> None:
        self.key_id = key_id
        super().__init__(
            message or f"no key {key_id!r} in the keyring: it is needed to read what it encrypted"
        )


class EncryptedStore(MissingKey):
    """The store is encrypted (or being converted) and was opened without its keyring: the open is
    refused, so nothing it holds is read and nothing is written in plain text beside it."""

    def __init__(self, what: str = "it") -> None:
        self.key_id = ""
        SafepointError.__init__(
            self,
            f"the store is encrypted, so {what} cannot be read or written without its keyring: open it with "
            "encryption=Keyring... (the CLI: --key-file or SAFEPOINT_KEYS)",
        )


class UnknownSecret(SafepointError, LookupError):
    """A secret reference names a secret the registry or resolver does not have."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no value for secret {name!r}: register it or give a resolver that knows it")
