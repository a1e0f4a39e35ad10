"""The keys an encrypted store is given: key-encryption keys by id, and the index key.

A keyring holds one or more key-encryption keys (KEKs), 32 random bytes
each, under ids of the caller's choosing; the last one added is the writing
key (new data keys are wrapped under it), the others are kept to read what
they protect until ``safepoint rekey`` has moved it. The index key (for
keyed digests and blind indexes) is separate and is never rotated by rekey.

Text form, for an environment variable or a file (``from_env``,
``from_file``): entries ``<id>:<key>`` separated by commas, spaces or
newlines, the key base64 (standard or URL-safe, padding optional) of 32
bytes; ``#`` starts a comment in a file. The index key is the entry with the
reserved id ``index``. Example::

    SAFEPOINT_KEYS="index:q1...= 2026-01:Zx...= 2026-06:Tf...="

Errors (``InvalidKey``) name the source and the entry, never the key; a key
id the keyring lacks is ``MissingKey``. ``open_store`` never reads the
environment: the CLI and the caller build the keyring.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from safepoint.errors import InvalidKey, MissingKey
from safepoint.forksafe import fork_safe_lock
from safepoint.visible import visible

KEY_BYTES = 32
INDEX_ID = "index"
# Ids go into every ciphertext and into error messages: short, printable, no separators.
_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_SEPARATORS = re.compile(r"[\s,]+")
MAX_SOURCE_BYTES = 1 << 20  # a key file larger than this is not a key file


def valid_key_id(key_id: object) -> bool:
    """Whether ``key_id`` may name a key: 1-64 letters, digits, ``.``, ``_``, ``-``, the first not a sign."""
    return type(key_id) is str and _KEY_ID.fullmatch(key_id) is not None


class Keyring:
    """Key-encryption keys by id (the last one writes) and the index key; thread-safe.

    Build one with ``from_env``, ``from_file``, ``from_callable`` or the
    constructor (``Keyring({"2026-01": key}, index_key=...)``, ids in the
    order they were added). Key bytes are never shown: not in ``repr``, not
    in an error.
    """

    def __init__(
        self,
        keys: dict[str, bytes] | None = None,
        *,
        index_key: bytes | None = None,
        fetch: Callable[[str], bytes] | None = None,
        ids: Sequence[str] = (),
        source: str = "the keyring",
    ) -> None:
        self._source = source
        self._keys: dict[str, bytes] = {}
        self._ids: list[str] = []
        self._fetch = fetch
        self._lock = fork_safe_lock(self)  # a fork while another thread holds it must not hang the child
        for key_id, key in (keys or {}).items():
            self._keys[_checked_id(key_id, source)] = _checked_key(key, key_id, source)
            self._ids.append(key_id)
        for key_id in ids:
            if _checked_id(key_id, source) not in self._ids:
                self._ids.append(key_id)
        if not self._ids:
            raise InvalidKey(f"{source} holds no key-encryption key")
        if index_key is None:
            raise InvalidKey(f"{source} has no index key (the entry {INDEX_ID!r})")
        self._index_key = _checked_key(index_key, INDEX_ID, source)

    @classmethod
    def from_text(cls, text: str, *, source: str = "the keyring text") -> Keyring:
        """A keyring from its text form (see the module docstring)."""
        keys: dict[str, bytes] = {}
        index_key = None
        lines = (line.split("#", 1)[0] for line in text.splitlines())
        for position, entry in enumerate(e for line in lines for e in _SEPARATORS.split(line) if e):
            key_id, sep, encoded = entry.partition(":")
            if not sep:
                raise InvalidKey(f"{source}: entry {position + 1} is not <id>:<key>")
            shown = key_id if valid_key_id(key_id) else f"#{position + 1}"
            key = _decoded(encoded, shown, source)
            if key_id == INDEX_ID:
                if index_key is not None:
                    raise InvalidKey(f"{source} names the index key twice")
                index_key = key
                continue
            if key_id in keys:
                raise InvalidKey(f"{source} names key {shown!r} twice")
            keys[_checked_id(key_id, source)] = key
        return cls(keys, index_key=index_key, source=source)

    @classmethod
    def from_env(cls, name: str, environ: dict[str, str] | None = None) -> Keyring:
        """A keyring from the environment variable ``name`` (the text form)."""
        value = (os.environ if environ is None else environ).get(name)
        if value is None:
            raise InvalidKey(f"the environment variable {visible(name, max_len=64)} is not set")
        return cls.from_text(value, source=f"the environment variable {visible(name, max_len=64)}")

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Keyring:
        """A keyring from a file in the text form.

        On POSIX the file must be private to its owner, as ssh asks of a private key: one that
        its group or other users may read or write (any of the mode bits 077) is refused with
        ``InvalidKey`` naming the path, before a byte of it is read.
        """
        shown = visible(str(path), max_len=200)
        try:
            with open(path, "rb") as file:
                _check_private(os.fstat(file.fileno()).st_mode, shown)
                data = file.read(MAX_SOURCE_BYTES + 1)
        except OSError as exc:
            raise InvalidKey(f"cannot read the key file {shown}: {exc.strerror or 'error'}") from None
        if len(data) > MAX_SOURCE_BYTES:
            raise InvalidKey(f"the key file {shown} is larger than a key file can be")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidKey(f"the key file {shown} is not UTF-8 text") from None
        return cls.from_text(text, source=f"the key file {Path(str(path)).name!r}")

    @classmethod
    def from_callable(cls, fetch: Callable[[str], bytes], ids: Iterable[str], *, index_key: bytes) -> Keyring:
        """A keyring whose keys come from ``fetch(key_id)`` (a vault, a KMS), asked once per id, when needed.

        ``ids``: the key ids it may hold, oldest first (the last one writes).
        """
        return cls(fetch=fetch, ids=list(ids), index_key=index_key, source="the key callable")

    @property
    def writing_id(self) -> str:
        """The id new data keys are wrapped under: the last one added."""
        return self._ids[-1]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(self._ids)

    @property
    def index_key(self) -> bytes:
        return self._index_key

    def key(self, key_id: str) -> bytes:
        """The key-encryption key ``key_id``; ``MissingKey`` when the keyring has none by that id."""
        found = self._keys.get(key_id)
        if found is not None:
            return found
        if self._fetch is None or key_id not in self._ids:
            raise MissingKey(key_id if valid_key_id(key_id) else "<not a key id>")
        with self._lock:
            if key_id not in self._keys:
                try:
                    fetched = self._fetch(key_id)
                except Exception:  # the callable's own error may quote what it read
                    raise InvalidKey(f"the key callable failed for key {key_id!r}") from None
                self._keys[key_id] = _checked_key(fetched, key_id, self._source)
            return self._keys[key_id]

    def holds(self, key_id: str) -> bool:
        """Whether the key ``key_id`` is in memory already (a key callable's is, once fetched)."""
        return key_id in self._keys

    def __repr__(self) -> str:
        return f"Keyring(ids={self._ids!r}, writing={self.writing_id!r})"


def _check_private(mode: int, shown: str) -> None:
    # The mode of the file opened (fstat), so a file swapped in after a check cannot slip past it.
    if os.name == "posix" and mode & 0o077:
        raise InvalidKey(
            f"the key file {shown} is open to other users (mode {stat.S_IMODE(mode):04o}): keys must be"
            " private to their owner, so it is not used; make it so with chmod 600 (docs/encryption.md)"
        )


def _checked_id(key_id: object, source: str) -> str:
    if not valid_key_id(key_id) or key_id == INDEX_ID:
        raise InvalidKey(
            f"{source}: a key id must be 1-64 letters, digits, '.', '_' or '-' (and not {INDEX_ID!r})"
        )
    assert isinstance(key_id, str)
    return key_id


def _checked_key(key: object, key_id: object, source: str) -> bytes:
    if type(key) is not bytes or len(key) != KEY_BYTES:
        shown = key_id if valid_key_id(key_id) or key_id == INDEX_ID else "?"
        raise InvalidKey(f"{source}: key {shown!r} is not {KEY_BYTES} bytes")
    return key


def _decoded(encoded: str, shown: str, source: str) -> bytes:
    padded = encoded + "=" * (-len(encoded) % 4)
    try:
        key = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidKey(f"{source}: key {shown!r} is not base64") from None
    return _checked_key(key, shown, source)
