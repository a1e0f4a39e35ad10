"""Store and AsyncStore are twins: each public method of one is the other's, same signature and docstring."""

from __future__ import annotations

import inspect
import pydoc
from typing import Any

import pytest

from safepoint import AsyncStore, Store

# Names only one of the two has, and why. Today none: the context-manager
# protocols (``__enter__``/``__aenter__``) are dunders, not public methods.
SYNC_ONLY: frozenset[str] = frozenset()
ASYNC_ONLY: frozenset[str] = frozenset()


def _public(cls: type) -> dict[str, Any]:
    return {name: inspect.getattr_static(cls, name) for name in dir(cls) if not name.startswith("_")}


def _methods(cls: type) -> set[str]:
    return {name for name, value in _public(cls).items() if inspect.isfunction(value)}


def test_every_public_method_has_a_twin() -> None:
    """Every public method of Store is a method of AsyncStore, and vice versa (but the listed ones)."""
    sync, awaited = _methods(Store), _methods(AsyncStore)
    assert sync - awaited == SYNC_ONLY
    assert awaited - sync == ASYNC_ONLY
    assert len(sync) >= 20  # the whole surface, not an empty class


def test_every_public_attribute_has_a_twin() -> None:
    """Properties too: the same public names, each a property on both or on neither."""
    sync, awaited = _public(Store), _public(AsyncStore)
    assert set(sync) - SYNC_ONLY == set(awaited) - ASYNC_ONLY
    for name in set(sync) & set(awaited):
        assert isinstance(sync[name], property) == isinstance(awaited[name], property), name
        if isinstance(sync[name], property):
            assert sync[name].__doc__ == awaited[name].__doc__, name


@pytest.mark.parametrize("name", sorted(_methods(Store) & _methods(AsyncStore)))
def test_twins_have_one_signature_and_one_docstring(name: str) -> None:
    """The async twin takes the same parameters (names, kinds, defaults, annotations), returns an
    awaitable of the same result, and carries the same docstring."""
    sync, awaited = getattr(Store, name), getattr(AsyncStore, name)
    assert not inspect.iscoroutinefunction(sync), name
    assert inspect.iscoroutinefunction(awaited), name
    assert inspect.signature(sync) == inspect.signature(awaited), name
    assert sync.__doc__, name
    assert inspect.getdoc(sync) == inspect.getdoc(awaited), name


@pytest.mark.parametrize("cls", [Store, AsyncStore])
def test_help_shows_real_signatures_and_docstrings(cls: type) -> None:
    """help() and inspect see each method as written in the call table: its own parameters
    (not ``*args, **kwargs``), its result type and its docstring."""
    load = inspect.signature(cls.load)  # type: ignore[attr-defined]
    assert list(load.parameters) == ["self", "run_id", "step", "resolve_secrets", "migrate", "fetch_blobs"]
    assert load.parameters["step"].default is None
    assert load.parameters["migrate"].kind is inspect.Parameter.KEYWORD_ONLY
    assert load.return_annotation.__name__ == "Checkpoint"
    assert cls.load.__qualname__ == f"{cls.__name__}.load"  # type: ignore[attr-defined]
    text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    assert "load(self, run_id: str, step: int | None = None, *," in text
    assert "The run's latest checkpoint, or the one at ``step``, verified." in text
    assert "Store ``checkpoint`` as the next step of its run, atomically and durably." in text
