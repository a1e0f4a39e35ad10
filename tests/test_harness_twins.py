"""The sync and async twins stay twins: every public method pair has one signature and one docstring.

``Run``/``AsyncRun`` and the LangGraph saver's ``x``/``ax`` methods run the
same flows (``safepoint.flow``), but their signatures and docstrings are
written twice, by hand. These tests hold them together: the same parameters
(names, kinds, defaults, annotations), the same return type and the same
docstring, once the async side's types are read as their sync counterparts
(``AsyncStore`` as ``Store``, ``AsyncRun`` as ``Run``, ``AsyncIterator`` as
``Iterator``, ``R | Awaitable[R]`` as ``R``) — and the async one is async.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from safepoint.adapters.langgraph import SafepointSaver
from safepoint.harness import AsyncRun, Run

_ASYNC_NAMES = (("AsyncStore", "Store"), ("AsyncRun", "Run"), ("AsyncIterator", "Iterator"))


def _sync_form(annotation: Any) -> str:
    """An annotation (a string, under ``from __future__ import annotations``) as its sync twin spells it."""
    text = "" if annotation is inspect.Parameter.empty else str(annotation)
    for async_name, sync_name in _ASYNC_NAMES:
        text = re.sub(rf"\b{async_name}\b", sync_name, text)
    return re.sub(r"(\w+) \| Awaitable\[\1\]", r"\1", text)


def _shape(fn: Callable[..., Any]) -> tuple[Any, ...]:
    """What must match between twins: each parameter, the return type, the docstring."""
    signature = inspect.signature(fn)
    parameters = tuple(
        (p.name, p.kind, p.default, _sync_form(p.annotation)) for p in signature.parameters.values()
    )
    return parameters, _sync_form(signature.return_annotation), inspect.getdoc(fn)


def _function(owner: type, name: str) -> Callable[..., Any]:
    """The plain function behind a method, classmethod or property (the getter) of ``owner``."""
    for klass in owner.__mro__:
        if name in vars(klass):
            member = vars(klass)[name]
            break
    else:  # pragma: no cover - the pairs below only name members that exist
        raise AssertionError(f"{owner.__name__} has no {name}")
    if isinstance(member, property):
        assert member.fget is not None
        return member.fget
    if isinstance(member, classmethod | staticmethod):
        return member.__func__  # type: ignore[no-any-return]
    return member  # type: ignore[no-any-return]


def _is_async(fn: Callable[..., Any]) -> bool:
    plain = inspect.unwrap(fn)
    return inspect.iscoroutinefunction(plain) or inspect.isasyncgenfunction(plain)


def _public(owner: type) -> set[str]:
    return {name for klass in owner.__mro__[:-1] for name in vars(klass) if not name.startswith("_")}


def _run_pairs() -> Iterator[tuple[str, str]]:
    for name in sorted(_public(Run)):
        yield name, name


def _saver_pairs() -> Iterator[tuple[str, str]]:
    # The saver's own methods and its mixins' (pruning.py, ownership.py), not LangGraph's base class.
    mine = [cls for cls in SafepointSaver.__mro__ if cls.__module__.startswith("safepoint.")]
    own = {name for cls in mine for name in vars(cls) if not name.startswith("_")}
    for name in sorted(own):
        if "a" + name in own:
            yield name, "a" + name


def test_run_and_async_run_have_the_same_public_names() -> None:
    """Every public attribute of ``Run`` is one of ``AsyncRun`` and the other way round."""
    assert _public(Run) == _public(AsyncRun)


def test_the_saver_has_an_async_twin_for_each_store_call() -> None:
    """The LangGraph saver pairs each of its store-backed methods with an ``a``-prefixed twin."""
    pairs = dict(_saver_pairs())
    assert set(pairs) >= {
        "get_tuple",
        "list",
        "put",
        "put_writes",
        "delete_thread",
        "copy_thread",
        "from_url",
        "prune",
        "delete_for_runs",
        "claim_write_ownership",
        "release_write_ownership",
    }


@pytest.mark.parametrize(("sync_name", "async_name"), list(_run_pairs()))
def test_run_twins_match(sync_name: str, async_name: str) -> None:
    """``Run.x`` and ``AsyncRun.x``: one signature and one docstring; the async one async where Run blocks."""
    sync_fn, async_fn = _function(Run, sync_name), _function(AsyncRun, async_name)
    assert _shape(async_fn) == _shape(sync_fn)
    assert not _is_async(sync_fn)
    if sync_fn is not async_fn and not isinstance(inspect.getattr_static(Run, sync_name), property):
        assert _is_async(async_fn), f"AsyncRun.{async_name} is not async"


@pytest.mark.parametrize(("sync_name", "async_name"), list(_saver_pairs()))
def test_saver_twins_match(sync_name: str, async_name: str) -> None:
    """``SafepointSaver.x`` and ``.ax``: one signature and one docstring, the async one async."""
    sync_fn, async_fn = _function(SafepointSaver, sync_name), _function(SafepointSaver, async_name)
    assert _shape(async_fn) == _shape(sync_fn)
    assert not _is_async(sync_fn)
    assert _is_async(async_fn), f"SafepointSaver.{async_name} is not async"
