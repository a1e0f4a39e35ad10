"""One way to be both sync and async, held: no body of safepoint is written twice for the two flavours.

Everything that exists blocking and awaiting is written once — a flow, or an
entry building one (``safepoint.twins``) — and run by a loop per flavour
(docs/architecture.md, "One way to be both sync and async"). Two checks:

- each twin pair of classes is rebuilt from its entries here, and must hold
  exactly what the entries make: the same entry objects on both sides, each
  method the one the entry makes (its code, name, signature, docstring), and
  no method written by hand on both sides but the flavour's own, listed
  below with why they differ;
- every module of ``src/`` is read with ``ast`` for pairs of functions named
  as twins (``x``/``ax``, ``x``/``x_async``, ``x`` in a class beside ``x``
  or ``ax`` in its ``Async`` kin): no pair may have bodies that are equal once
  ``await`` and ``async`` are taken out. A synthetic module proves the
  check catches a hand-written twin.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from safepoint import AsyncStore, Store, flow, retrying, twins
from safepoint.harness import AsyncRun, Run, leased
from safepoint.harness.holders import AsyncHolding, Holding
from safepoint.store.postgres.async_driver import PostgresAsyncDriver
from safepoint.store.postgres.driver import PostgresDriver

SRC = Path(__file__).resolve().parent.parent / "src"

# The twin classes, and what each flavour writes for itself (not an entry), with why: what
# differs between the flavours is how they wait, which no flow can say for them.
PAIRS: list[tuple[type, type, dict[str, str]]] = [
    (Store, AsyncStore, {}),
    (Run, AsyncRun, {}),
    (
        PostgresDriver,
        PostgresAsyncDriver,
        {
            "_own_pool": "a forked child's pool: under a thread lock, opened at once / in one loop, awaited",
            "_reopened": "the child's new pool opened at once / left for the next awaiting call to open",
        },
    ),
    (
        Holding,
        AsyncHolding,
        {
            "_start": "the heartbeat on a daemon thread / on an asyncio task",
            "_stop": "a thread is woken by its event / a task is cancelled",
            "_collected": "a collected Run lets go in place or hands over / schedules a task on its loop",
        },
    ),
]


def _plain(member: Any) -> Any:
    return member.__func__ if isinstance(member, classmethod | staticmethod) else member


def _written_here(cls: type) -> dict[str, Any]:
    """The functions and properties ``cls``'s own body defines (what an entry made aside)."""
    made = {entry.name for entry in cls._entries.values()}  # type: ignore[attr-defined]
    return {
        name: value
        for name, value in vars(cls).items()
        if name not in made and (inspect.isfunction(_plain(value)) or isinstance(value, property))
    }


@pytest.mark.parametrize(("sync", "awaited", "own"), PAIRS, ids=[p[0].__name__ for p in PAIRS])
def test_each_twin_class_is_its_entries(sync: type, awaited: type, own: dict[str, str]) -> None:
    """Both classes hold the same entries, each as the method the entry makes for the class's
    flavour — and nothing written by hand on both sides but the flavour's own."""
    entries = sync._entries  # type: ignore[attr-defined]
    assert entries, f"{sync.__name__} has no entries"
    assert awaited._entries == entries  # type: ignore[attr-defined]  # the very same entry objects
    for name, entry in entries.items():
        for cls, coroutine in ((sync, False), (awaited, True)):
            method = _plain(vars(cls).get(name) or inspect.getattr_static(cls, name))
            rebuilt = cls._method(entry)  # type: ignore[attr-defined]
            assert method.__code__ is rebuilt.__code__, f"{cls.__name__}.{name} is not its entry's method"
            assert (method.__name__, method.__doc__) == (rebuilt.__name__, rebuilt.__doc__)
            assert inspect.signature(method) == inspect.signature(rebuilt), f"{cls.__name__}.{name}"
            assert inspect.iscoroutinefunction(method) is coroutine, f"{cls.__name__}.{name}"
    by_hand = set(_written_here(sync)) & set(_written_here(awaited))
    assert by_hand == set(own), f"written by hand in both {sync.__name__} and {awaited.__name__}"


def _face_of(fn: Callable[..., Any]) -> ast.expr:
    """The call a face returns: ``fn``'s body is at most a few assignments and ``return <call>``."""
    node = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    assert all(isinstance(s, ast.Assign | ast.AnnAssign) for s in body[:-1]), f"{fn.__name__} holds logic"
    last = body[-1]
    assert isinstance(last, ast.Return), f"{fn.__name__} is not a face"
    assert last.value is not None
    value = last.value.value if isinstance(last.value, ast.Await) else last.value
    assert isinstance(value, ast.Call)
    return value.func


@pytest.mark.parametrize(
    ("face", "loop"),
    [
        (retrying.call, "blocking"),
        (retrying.save, "blocking"),
        (flow.drive, "blocking"),
        (flow.adrive, "awaiting"),
    ],
    ids=["retrying.call", "retrying.save", "flow.drive", "flow.adrive"],
)
def test_module_faces_only_run_a_flow(face: Callable[..., Any], loop: str) -> None:
    """The retry policy and the flows' drivers are flows; their functions only hand one to a loop."""
    func = _face_of(face)
    assert isinstance(func, ast.Name)
    assert func.id == loop


def test_retrying_and_leased_have_no_async_twin() -> None:
    """The retries, the checked save and a leased or held run's filters are flows, for both loops:
    no async copy of them, and no store wrapper class per flavour."""
    for module in (retrying, leased):
        tree = ast.parse(inspect.getsource(module))
        assert not [n for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef)], module.__name__
    assert not [n for n in ast.parse(inspect.getsource(leased)).body if isinstance(n, ast.ClassDef)]


def test_the_loops_are_the_only_ones() -> None:
    """One door for the mechanism: only safepoint.twins drives a generator by throwing into it,
    and safepoint.relaying, its pair of loops for a flow whose call streams to its caller."""
    throwing = sorted(
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if ".throw(" in path.read_text(encoding="utf-8")
    )
    assert throwing == ["safepoint/relaying.py", "safepoint/twins.py"]
    assert twins.blocking.__module__ == twins.awaiting.__module__ == "safepoint.twins"


# -- the scan: pairs of functions named as twins, with one body --------------------------------


class _Unflavoured(ast.NodeTransformer):
    """A body as it reads without ``await`` and ``async`` (and ``AsyncX`` read as ``X``)."""

    def visit_Await(self, node: ast.Await) -> Any:
        return self.visit(node.value)

    def visit_AsyncWith(self, node: ast.AsyncWith) -> Any:
        node = self.generic_visit(node)  # type: ignore[assignment]
        return ast.With(items=node.items, body=node.body)

    def visit_AsyncFor(self, node: ast.AsyncFor) -> Any:
        node = self.generic_visit(node)  # type: ignore[assignment]
        return ast.For(target=node.target, iter=node.iter, body=node.body, orelse=node.orelse)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> Any:
        node = self.generic_visit(node)  # type: ignore[assignment]
        return ast.FunctionDef(
            name=node.name,
            args=node.args,
            body=node.body,
            decorator_list=node.decorator_list,
            returns=node.returns,
        )

    def visit_Name(self, node: ast.Name) -> Any:
        return ast.Name(id=_sync_name(node.id), ctx=ast.Load())

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        node = self.generic_visit(node)  # type: ignore[assignment]
        return ast.Attribute(value=node.value, attr=_sync_name(node.attr), ctx=ast.Load())


def _sync_name(name: str) -> str:
    return re.sub(r"(^|(?<=[a-z]))Async(?=[A-Z])", "", name)


def _body(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The function's body, unflavoured, as text; None for a declaration (only a docstring, ``...``)."""
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) for s in body):
        return None  # a protocol's or a stub's: nothing written
    module = ast.Module(body=[_Unflavoured().visit(ast.parse(ast.unparse(s))) for s in body], type_ignores=[])
    return ast.dump(module, annotate_fields=False)


Function = tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]  # (where, node)


def _twin_names(name: str) -> set[str]:
    """The names ``name``'s async twin may have: itself (in an Async class), ``aname``, ``name_async``."""
    names = {name, "a" + name, name + "_async"}
    if name.startswith("_") and not name.startswith("__"):
        names |= {"_a" + name[1:], "_async" + name}
    return names


def hand_written_twins(sources: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The pairs of functions named as twins whose bodies are one body, in ``sources`` (path, text)."""
    module_level: dict[str, dict[str, Function]] = {}
    classes: dict[str, dict[str, Function]] = {}
    for path, text in sources:
        for node in ast.parse(text).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                module_level.setdefault(path, {})[node.name] = (f"{path}:{node.name}", node)
            elif isinstance(node, ast.ClassDef):
                methods = classes.setdefault(node.name, {})
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        methods[item.name] = (f"{path}:{node.name}.{item.name}", item)
    groups: list[tuple[dict[str, Function], dict[str, Function], bool]] = [
        (functions, functions, False) for functions in module_level.values()
    ]
    for name, methods in classes.items():
        groups.append((methods, methods, False))  # x and ax side by side in one class
        if _sync_name(name) != name and _sync_name(name) in classes:
            groups.append((classes[_sync_name(name)], methods, True))  # X and AsyncX
    found = []
    for sync, awaited, same_name in groups:
        for name, (where, node) in sync.items():
            for twin in _twin_names(name) - ({name} if not same_name else set()):
                if twin in awaited:
                    other_where, other = awaited[twin]
                    body = _body(node)
                    if body is not None and body == _body(other):
                        found.append((where, other_where))
    return found


def _sources() -> list[tuple[str, str]]:
    return [(str(p.relative_to(SRC)), p.read_text(encoding="utf-8")) for p in sorted(SRC.rglob("*.py"))]


def test_no_body_is_written_twice_for_sync_and_async() -> None:
    """No pair of functions named as twins anywhere in src/ has one body written twice."""
    assert hand_written_twins(_sources()) == []


SYNTHETIC = '''
import asyncio

def fetch(store, run_id):
    cp = store.load(run_id)
    return cp.step

async def afetch(store, run_id):
    """A docstring of its own does not make it another body."""
    cp = await store.load(run_id)
    return cp.step

def save(store, cp):
    return store.save(cp)

async def save_async(store, cp):
    return await asyncio.to_thread(store.save, cp)   # a different body: how it waits differs

class Thing:
    def close(self):
        with self.lock:
            self.conn.close()

class AsyncThing:
    async def close(self):
        async with self.lock:
            await self.conn.close()

    async def aopen(self):
        return await AsyncThing.make()

class Holder:
    def open(self):
        return Thing.make()

class AsyncHolder:
    async def open(self):
        return await AsyncThing.make()
'''


def test_the_scan_catches_a_hand_written_twin() -> None:
    """Twins by name with one body are caught — module functions, a class and its Async kin, ``AsyncX``
    read as ``X`` — and a pair whose bodies differ in how they wait is not."""
    found = hand_written_twins([("synthetic.py", SYNTHETIC)])
    assert found == [
        ("synthetic.py:fetch", "synthetic.py:afetch"),
        ("synthetic.py:Thing.close", "synthetic.py:AsyncThing.close"),
        ("synthetic.py:Holder.open", "synthetic.py:AsyncHolder.open"),
    ]


def test_the_scan_reads_the_twins_this_issue_removed() -> None:
    """What the check was written against: before one mechanism, safepoint's own twins (here two
    of them, as they were) are caught."""
    before = '''
class Store:
    def close(self):
        """Release the connection(s)."""
        self._driver.close()

class AsyncStore:
    async def close(self):
        """Release the connection(s)."""
        await self._driver.close()

class Run:
    def commit(self, *, status=None):
        return self._drive(self._core.commit(Status(status)))

class AsyncRun:
    async def commit(self, *, status=None):
        return await self._drive(self._core.commit(Status(status)))
'''
    assert len(hand_written_twins([("before.py", before)])) == 2
