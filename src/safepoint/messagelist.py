"""The message list a checkpoint carries, and what it knows about the store.

Flat save cost needs the delta between this checkpoint's messages and what the
previous save persisted, *without* comparing the whole history (DESIGN:
pitfalls). Two cheap mechanisms make that possible:

* ``MessageList`` is a ``list`` that remembers the lowest index changed since
  it was last saved or loaded (``clean_prefix``). Appends don't lower it;
  assignment, deletion, insertion, sorting … do.
* Messages that are already stored are *frozen* (``FrozenDict`` /
  ``FrozenList``): mutating one in place raises ``TypeError`` instead of being
  silently missed. To change history, replace the message
  (``cp.messages[3] = {...}``) or assign a new list; copy a frozen message with
  ``dict(m)`` or ``copy.deepcopy(m)``.

``StoredView`` is what the last save/load persisted: which log rows the
checkpoint sees and the digest chain value after each message.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NoReturn, SupportsIndex

from safepoint.codec import EMPTY_CHAIN, json_container
from safepoint.refs import REF_TYPES

_FROZEN_HINT = "messages already saved are immutable; replace the message instead of mutating it"


def _refuse(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise TypeError(_FROZEN_HINT)


@json_container(dict)
class FrozenDict(dict[str, Any]):
    """A stored message (or a dict inside one): a real ``dict`` that refuses mutation."""

    __slots__ = ()
    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        # copy/deepcopy/pickle give back an ordinary, mutable dict.
        return (dict, (dict(self),))


@json_container(list)
class FrozenList(list[Any]):
    """A list inside a stored message (e.g. content parts) that refuses mutation."""

    __slots__ = ()
    __setitem__ = __delitem__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse
    __iadd__ = __imul__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))


_LEAF_TYPES = frozenset({str, int, float, bool, type(None)})


def freeze(value: Any) -> Any:
    """A deep, immutable copy of a JSON value (strings, numbers and the store's
    own references, which are immutable already, are shared)."""
    # Most messages are flat plain dicts ({"role": ..., "content": "..."}): one C-level copy.
    if type(value) is dict and _LEAF_TYPES.issuperset(map(type, value.values())):
        return FrozenDict(value)
    if isinstance(value, REF_TYPES):
        return value
    if isinstance(value, dict):
        if _LEAF_TYPES.issuperset(map(type, value.values())):
            return FrozenDict(value)
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenList(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A deep, mutable copy of a JSON value (the store's references stay as they
    are: a plain dict in their place would be input on the next save)."""
    if isinstance(value, REF_TYPES):
        return value
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value


# Not frozen: one is made on every save, where frozen's object.__setattr__ per field costs more
# than the rest of the object (about 1.3 K instructions a field). Never changed once made.
@dataclass(slots=True)
class StoredView:
    """What the store holds for one checkpoint's messages.

    ``chains[i]`` is the digest chain value after message ``i``; only the first
    ``count`` entries belong to this view (the list may be shared and longer).
    ``ranges`` are half-open ``[start, end)`` spans of the run's message log;
    ``carriers`` says, for each, the first and last step of the rows that
    carry its messages (None when not known), so a load finds them by key.
    """

    run_id: str
    step: int
    digest: bytes  # the checkpoint's digest: tells whether the run's head is still this view
    count: int
    chains: list[bytes]
    ranges: tuple[tuple[int, int], ...]
    carriers: tuple[tuple[int, int], ...] | None = None

    def chain_at(self, count: int) -> bytes:
        """Chain value after the first ``count`` messages of this view."""
        return self.chains[count - 1] if count else EMPTY_CHAIN

    def ranges_for_prefix(self, count: int) -> list[tuple[int, int]]:
        """The log spans holding this view's first ``count`` messages."""
        out: list[tuple[int, int]] = []
        remaining = count
        for start, end in self.ranges:
            if remaining <= 0:
                break
            take = min(end - start, remaining)
            out.append((start, start + take))
            remaining -= take
        return out

    def carriers_for_prefix(self, count: int) -> list[tuple[int, int]] | None:
        """The carriers of ``ranges_for_prefix(count)`` (a range cut short keeps its
        last step: the rows past the cut are skipped on load without being read)."""
        if self.carriers is None:
            return None
        return list(self.carriers[: len(self.ranges_for_prefix(count))])


@json_container(list)
class MessageList(list[Any]):
    """A ``list`` of messages that tracks the lowest index changed since it
    was last saved or loaded. Behaves exactly like a list otherwise."""

    __slots__ = ("clean_prefix", "stored")

    def __init__(self, items: Iterable[Any] = (), stored: StoredView | None = None) -> None:
        super().__init__(items)
        self.stored = stored
        # Without a stored view nothing is known to be in the store yet.
        self.clean_prefix = len(self) if stored is not None else 0

    def _touch(self, index: int) -> None:
        if index < self.clean_prefix:
            self.clean_prefix = max(index, 0)

    def _touch_key(self, key: SupportsIndex | slice) -> None:
        if isinstance(key, slice):
            start, _stop, _step = key.indices(len(self))
            self._touch(min(start, _stop) if _step < 0 else start)
        else:
            i = key.__index__()
            self._touch(i + len(self) if i < 0 else i)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._touch_key(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        self._touch_key(key)
        super().__delitem__(key)

    def insert(self, index: SupportsIndex, value: Any) -> None:
        i = index.__index__()
        self._touch(min(i + len(self) if i < 0 else i, len(self)))
        super().insert(index, value)

    def pop(self, index: SupportsIndex = -1) -> Any:
        self._touch_key(index)
        return super().pop(index)

    def remove(self, value: Any) -> None:
        self._touch(self.index(value))
        super().remove(value)

    def clear(self) -> None:
        self._touch(0)
        super().clear()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._touch(0)
        super().sort(*args, **kwargs)

    def reverse(self) -> None:
        self._touch(0)
        super().reverse()

    def __imul__(self, n: SupportsIndex) -> MessageList:
        if n.__index__() < 1:
            self._touch(0)
        super().__imul__(n)
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))
