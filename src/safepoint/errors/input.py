"""A call was given something it cannot take: an argument, a checkpoint, a URL,
a missing extra, a malformed migration chain. All are ``ValueError``s too.

See ``safepoint.errors`` for the whole tree.
"""

from __future__ import annotations

from .base import SafepointError


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


class SecretLeak(InvalidCheckpoint):
    """The scrubber found a secret and the store's policy is ``raise``; nothing was written.

    Names the field path and the rule (or registered secret name), never the value.
    """

    def __init__(self, path: str, rule: str) -> None:
        self.path = path
        self.rule = rule
        super().__init__(f"{path}: holds a secret matched by {rule!r}; refusing to store it")


class InvalidURL(InvalidArgument):
    """``open_store`` was given a URL or option it cannot serve."""


class InvalidKey(InvalidArgument):
    """A key or a keyring source is malformed, or a key is not the store's (a key-encryption key that
    does not open its data key, another index key): names the source or the key id, never key material."""


class NotEncrypted(InvalidArgument):
    """A keyring was given for a store that is not encrypted, where it could not be made so
    (a read-only open): ``safepoint encrypt`` converts a store."""


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


class InvalidMigrationChain(InvalidArgument):
    """A migration chain is malformed: a gap, a duplicate, or a version beyond current."""
