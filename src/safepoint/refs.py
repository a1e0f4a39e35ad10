"""What the store itself wrote, as types: the only things a load ever interprets.

Every string and value in a checkpoint may come from an attacker (a web page,
a tool's output, a model reply that follows injected instructions). So the
store never trusts a *shape*: a ``{"$secret": NAME}`` dict or a
``[SECRET:NAME]`` marker in input is plain data, saved and loaded back exactly
as given, and never resolved. Only what the store wrote in a save is
interpreted on load, and it comes back as one of these types:

* :class:`SecretRef` — a string that *was* a registered secret;
* :class:`ScrubbedText` — a string in which the scrubber replaced parts by
  markers (``[SECRET:NAME|enc]``, ``[REDACTED:rule]``); ``marks`` says where;
* :class:`BlobLink` — a large value left in the blob store
  (``load(..., fetch_blobs=False)``).

Each is a subclass of a plain JSON type (``dict`` or ``str``), equal to the
text or dict it shows, so code that only reads a checkpoint sees ordinary
JSON. Saving a loaded checkpoint again recognises them by type and writes the
same reference — so a reference survives a load → save without being
resolved, and a look-alike from input can never become one.

How they are stored (canonical JSON, read by ``safepoint.store``):

* input dict keys that begin with ``$`` get one more ``$`` (``$secret`` is
  stored as ``$$secret``) and lose it on load, so a single-``$`` key in a
  stored value was always written by the store;
* ``{"$secret": NAME}``, ``{"$blob": {...}}``, and
  ``{"$marks": [[start, end], …], "$text": TEXT}`` for scrubbed text (``TEXT``
  a blob reference when the text is large: a ``BlobLink`` with ``marks``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NoReturn

SECRET_KEY = "$secret"
BLOB_KEY = "$blob"
TEXT_KEY = "$text"
MARKS_KEY = "$marks"

Span = tuple[int, int]


def _refuse(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise TypeError("a store-written reference is immutable")


class _FrozenRefDict(dict[str, Any]):
    __slots__ = ()
    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse


class SecretRef(_FrozenRefDict):
    """A registered secret the store replaced: equal to ``{"$secret": NAME}``.

    ``load(..., resolve_secrets=…)`` puts the value back; saving it again
    keeps the reference. Only the store creates these on load; code that
    wants to put a reference into a checkpoint on purpose may build one.
    """

    __slots__ = ()

    def __init__(self, name: str) -> None:
        dict.__init__(self, {SECRET_KEY: name})

    @property
    def name(self) -> str:
        return str(self[SECRET_KEY])

    def __repr__(self) -> str:
        return f"SecretRef({self.name!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (SecretRef, (self.name,))


class BlobLink(_FrozenRefDict):
    """A value the store keeps in its blob store: equal to ``{"$blob": {...}}``.

    Returned by ``load(..., fetch_blobs=False)``; ``store.fetch_blob(link)``
    reads the value, and saving it again keeps the reference.
    """

    __slots__ = ("marks",)
    marks: tuple[Span, ...]

    def __init__(self, digest: str, size: int, media_type: str, marks: Iterable[Span] = ()) -> None:
        dict.__init__(self, {BLOB_KEY: {"sha256": digest, "size": size, "media_type": media_type}})
        # Large scrubbed text kept in the blob store: where its markers are.
        self.marks = tuple(marks)

    @property
    def digest(self) -> str:
        return str(self[BLOB_KEY]["sha256"])

    @property
    def size(self) -> int:
        return int(self[BLOB_KEY]["size"])

    @property
    def media_type(self) -> str:
        return str(self[BLOB_KEY]["media_type"])

    def __repr__(self) -> str:
        return f"BlobLink({self.digest[:12]}…, size={self.size}, media_type={self.media_type!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (BlobLink, (self.digest, self.size, self.media_type, self.marks))


class ScrubbedText(str):
    """Text in which the scrubber wrote markers; ``marks`` are their ``(start, end)`` spans.

    It is the text as stored (``"Bearer [SECRET:API_KEY|base64]"``); only the
    spans in ``marks`` are markers — marker-shaped text anywhere else came
    from input and means nothing. Slicing or concatenating gives a plain
    ``str`` (the markers in it are then plain text: never resolved).
    """

    __slots__ = ("marks",)
    marks: tuple[Span, ...]

    def __new__(cls, text: str, marks: Iterable[Span]) -> ScrubbedText:
        self = super().__new__(cls, text)
        self.marks = tuple(marks)
        return self

    def __repr__(self) -> str:
        return f"ScrubbedText({str.__repr__(self)}, marks={list(self.marks)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ScrubbedText, (str(self), self.marks))


REF_TYPES: tuple[type, ...] = (SecretRef, BlobLink, ScrubbedText)


def text_form(text: ScrubbedText) -> Any:
    """Scrubbed text as stored: with its marks, or a plain ``str`` when it has none."""
    if not text.marks:
        return str(text)
    return {MARKS_KEY: [list(span) for span in text.marks], TEXT_KEY: str(text)}


def link_form(link: BlobLink) -> Any:
    """A blob link as stored: the link, or scrubbed text whose text is in the blob store."""
    if not link.marks:
        return link
    plain = BlobLink(link.digest, link.size, link.media_type)
    return {MARKS_KEY: [list(span) for span in link.marks], TEXT_KEY: plain}
