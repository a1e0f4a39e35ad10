"""A checkpoint as a fixture file and back: what ``safepoint export`` writes and ``safepoint import`` reads.

A fixture file is ``{"safepoint_fixture": 2, "checkpoint": {...}}`` written
with sorted keys and two-space indents, newline-terminated, so that it diffs
well in code review and the same checkpoint always gives the same bytes. A
run's recorded calls travel with its checkpoint under ``"calls"`` (only when
it has some: ``fixture_values`` says how, and at which step an import puts
them); a reader that knows no ``"calls"`` reads the checkpoint as before.

Format 2 writes the checkpoint's values the way the store keeps them
(``safepoint.refs``): what the store wrote — a secret reference, scrubbed
text with its marks, a blob link — as its single-``$`` object, any ``$`` key
of the data with one more ``$``, and ``bytes`` as ``{"$bytes": base64}``. So
a fixture carries references explicitly, and reading it back gives the
same typed values. In a format 1 fixture nothing was escaped, so there every
reference-shaped dict is plain data: importing it never resolves a secret.

On request (``encryption=`` a ``Keyring``; ``safepoint export --encrypt``)
the fixture's text is written sealed under the keyring's writing key
(``crypto.documents``): a JSON document naming the key ids, and nothing of
the checkpoint. Reading it needs the keyring; without it, ``MissingKey``
names the key id.

The test helpers built on these (``assert_migrates`` and the whole-store
checks) are in ``safepoint.testing.migrations``; see docs/migrations.md.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from safepoint import codec
from safepoint.errors import InvalidArgument
from safepoint.model import (
    FIELD_TYPES,
    STORE_FIELDS,
    VALUE_FIELDS,
    VALUE_TYPES,
    Checkpoint,
    ParentRef,
    Status,
    value_default,
)
from safepoint.records import CallCopy

from .fixture_values import calls_in, calls_out, value_in, value_out

if TYPE_CHECKING:
    from safepoint.crypto.keyring import Keyring

__all__ = [
    "FIXTURE_FORMAT",
    "fixture_checkpoint",
    "fixture_text",
    "read_fixture",
    "read_fixture_run",
    "unwrap_fixture",
    "write_fixture",
]

FIXTURE_FORMAT = 2
_VALUE_FIELDS = ("messages", *VALUE_FIELDS)
# What an import requires, with the types ``to_dict`` gives them: every field
# but those the store sets (a fresh import gets its own) and the parent (checked apart).
_FIXTURE_FIELDS = {
    name: kinds for name, kinds in FIELD_TYPES.items() if name not in ("parent", *STORE_FIELDS)
}
_FIXTURE_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
# The most a fixture file may hold. A fixture is one checkpoint, read whole and
# parsed in memory (several times its size): 1 GiB is far beyond any run a
# test or a reproduction needs, yet bounds what ``import`` reads from a path it
# was handed. ``fixture_text`` refuses to write more, so every fixture
# ``export`` writes can be imported again.
MAX_FIXTURE_BYTES = 2**30

JSONDict = dict[str, Any]


def fixture_text(
    checkpoint: Checkpoint | Mapping[str, Any],
    *,
    calls: Sequence[CallCopy] = (),
    encryption: Keyring | None = None,
) -> str:
    """The fixture file's text for ``checkpoint`` (a Checkpoint or its ``to_dict()``), with the
    run's recorded ``calls`` that travel with it (``Store.export_calls``; ``fixture_values``).

    What ``write_fixture`` writes and ``safepoint export`` prints; sealed
    under ``encryption``'s writing key when a keyring is given. Raises
    ``NotJSONCompatible`` naming the path of a value that is not JSON data.
    """
    data = checkpoint.to_dict() if isinstance(checkpoint, Checkpoint) else checkpoint
    if not isinstance(data, Mapping):
        raise InvalidArgument(f"a fixture holds a Checkpoint or its dict, not {type(data).__name__}")
    data = dict(data)
    codec.check_json(
        data, "checkpoint", allow_bytes=True, max_depth=codec.MAX_DEPTH + 1
    )  # the fields sit one level down
    for name in _VALUE_FIELDS:
        if name in data:
            data[name] = value_out(data[name])
    envelope: JSONDict = {"safepoint_fixture": FIXTURE_FORMAT, "checkpoint": data}
    if calls:  # a fixture without entries keeps the bytes it always had
        envelope["calls"] = calls_out(calls)
    encoded = orjson.dumps(envelope, option=_FIXTURE_OPTIONS)
    if encryption is None:
        return _bounded(encoded, len(encoded))
    from safepoint.crypto.documents import seal_document  # noqa: PLC0415  (needs the encryption extra)

    sealed = seal_document(encoded, encryption, "fixture")
    return _bounded(sealed, len(sealed.encode("utf-8")))


def _bounded(text: bytes | str, size: int) -> str:
    if size > MAX_FIXTURE_BYTES:
        raise InvalidArgument(f"the fixture would be larger than {MAX_FIXTURE_BYTES} bytes, the most allowed")
    return text.decode("utf-8") if isinstance(text, bytes) else text


def write_fixture(
    checkpoint: Checkpoint | Mapping[str, Any], path: str | Path, *, encryption: Keyring | None = None
) -> Path:
    """Write ``checkpoint`` as a fixture file at ``path`` (its folder is created; sealed under
    ``encryption`` when a keyring is given); returns the path."""
    path = Path(path)
    text = fixture_text(checkpoint, encryption=encryption)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def read_fixture(path: str | Path, *, encryption: Keyring | None = None) -> JSONDict:
    """The checkpoint dict stored in the fixture file at ``path``.

    Raises ``InvalidArgument`` naming the file when it is not valid JSON or
    not a safepoint fixture of a format this version reads; a sealed
    fixture needs ``encryption`` (``MissingKey`` names the key id).
    """
    return unwrap_fixture(_document(path, encryption), str(path))


def read_fixture_run(
    path: str | Path, run_id: str | None = None, *, encryption: Keyring | None = None
) -> tuple[Checkpoint, list[CallCopy]]:
    """What ``safepoint import`` starts a run from: the new run's step 0 (``fixture_checkpoint``)
    and the recorded calls that travel with it, their steps counted from the checkpoint's
    (``fixture_values.calls_in``), for ``Store.import_calls`` once the checkpoint is saved."""
    where = str(path)
    document = _document(path, encryption)
    data = unwrap_fixture(document, where)
    cp = fixture_checkpoint(data, run_id)
    calls = document.get("calls", [])
    if not calls:
        return cp, []
    step = data.get("step")
    if type(step) is not int:
        raise InvalidArgument(f"{where}: the fixture's checkpoint has no int step for its calls")
    return cp, calls_in(calls, step, cp.run_id, where)


def _document(path: str | Path, encryption: Keyring | None) -> Any:
    where = str(path)
    data = _fixture_bytes(path, where)
    try:
        document = codec.decode(data)
    except ValueError as exc:
        raise InvalidArgument(f"{where}: not a safepoint fixture (not valid JSON)") from exc
    if isinstance(document, dict) and "safepoint_sealed" in document:
        from safepoint.crypto.documents import open_document  # noqa: PLC0415  (needs the encryption extra)

        content = open_document(document, encryption, "fixture", where)
        try:
            document = codec.decode(content)
        except ValueError as exc:
            raise InvalidArgument(f"{where}: the sealed fixture holds no valid JSON") from exc
    return document


def _fixture_bytes(path: str | Path, where: str) -> bytes:
    """The bytes of the regular file at ``path``, at most ``MAX_FIXTURE_BYTES``.

    A device, FIFO or socket is refused before a byte is read (``/dev/zero``
    never ends; a FIFO blocks the open, hence ``O_NONBLOCK``), and the read
    stops one byte past the bound even if the file grows meanwhile.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InvalidArgument(f"{where}: cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as file:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise InvalidArgument(f"{where}: not a regular file (a fixture is a file safepoint export wrote)")
        data = b"" if found.st_size > MAX_FIXTURE_BYTES else file.read(MAX_FIXTURE_BYTES + 1)
    if found.st_size > MAX_FIXTURE_BYTES or len(data) > MAX_FIXTURE_BYTES:
        raise InvalidArgument(f"{where}: larger than {MAX_FIXTURE_BYTES} bytes, the most a fixture may hold")
    return data


def unwrap_fixture(document: Any, where: str) -> JSONDict:
    """The checkpoint dict in a parsed fixture document; ``InvalidArgument`` naming ``where`` if none."""
    if not isinstance(document, dict) or "safepoint_fixture" not in document:
        raise InvalidArgument(f"{where}: not a safepoint fixture (no 'safepoint_fixture' key)")
    version = document["safepoint_fixture"]
    if type(version) is not int or version not in (1, FIXTURE_FORMAT):
        raise InvalidArgument(
            f"{where}: the fixture's format is not one this version reads (1 or {FIXTURE_FORMAT})"
        )
    checkpoint = document.get("checkpoint")
    if not isinstance(checkpoint, dict):
        raise InvalidArgument(f"{where}: the fixture's 'checkpoint' is not a dict")
    if version == FIXTURE_FORMAT:  # references written explicitly; format 1's are data
        checkpoint = dict(checkpoint)
        for name in _VALUE_FIELDS:
            if name in checkpoint:
                checkpoint[name] = value_in(checkpoint[name])
    return checkpoint


def fixture_checkpoint(data: Mapping[str, Any], run_id: str | None = None) -> Checkpoint:
    """A new run's step 0 from a fixture's checkpoint dict (``read_fixture``), as
    ``safepoint import`` starts it; ``InvalidArgument`` names a missing or bad field.
    A value field the fixture lacks (written before the field existed) takes its default."""
    for name, kinds in _FIXTURE_FIELDS.items():
        if name not in data:
            if name in VALUE_TYPES:
                continue
            raise InvalidArgument(f"the fixture's checkpoint has no {name!r} field")
        if not isinstance(data[name], kinds):
            raise InvalidArgument(f"the fixture's checkpoint field {name!r} has the wrong type")
    parent = data.get("parent")
    if parent is not None and not (
        isinstance(parent, dict) and isinstance(parent.get("run_id"), str) and type(parent.get("step")) is int
    ):
        raise InvalidArgument("the fixture's checkpoint field 'parent' has the wrong type")
    try:
        status = Status(data["status"])
    except ValueError:
        raise InvalidArgument("the fixture's checkpoint field 'status' is not a known status") from None
    labels = {**data["labels"], "imported_from": f"{data['run_id']}@{data['step']}"}
    return Checkpoint(
        run_id=run_id or data["run_id"],
        step=0,
        schema_version=data["schema_version"],
        messages=list(data["messages"]),
        counters=data["counters"],
        **{name: data[name] if name in data else value_default(name) for name in VALUE_FIELDS},
        status=status,
        labels=labels,
        parent=None if parent is None else ParentRef(parent["run_id"], parent["step"]),
    )
