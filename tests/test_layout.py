"""The shape of src/safepoint, read from its source: every import (those inside
functions too), every module's length.

- No import cycle between modules, and none between packages (a package
  being all its modules, a module directly under ``safepoint`` one of its
  own): ``cli`` may use ``ui`` only if ``ui`` never uses ``cli``. A
  package's ``__init__`` importing its own submodules (to present the
  package's surface), or a package its own subpackages, is how packages
  work and is not counted.
- Imports point down DESIGN.md's layers: model/errors/codec at the bottom,
  then blobs and the scrubber, then the store, then everything built on it.
- The CLI, the harness, the worker, the adapters and the demo use the public
  API: of the store, only ``safepoint.store`` and ``safepoint.store.admin``;
  never ``safepoint.testing``.
- No module over 400 lines, apart from rule tables that are pure data;
  one over 300 lines warns (``LongModule``): look for a seam there — a
  subject, a layer, a reader's question — never cut at a line count.
- The median module (by lines) is between 100 and 250 lines: neither a
  maze of tiny rooms nor a few halls.
"""

from __future__ import annotations

import ast
import statistics
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"

# Bottom to top. A module may import modules of its own layer or below; the
# longest matching prefix decides a module's layer.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "base",
        (
            "safepoint.errors",
            "safepoint.codec",
            "safepoint.long_text",
            "safepoint.crypto",
            "safepoint.model",
            "safepoint.model",
            "safepoint.records",
            "safepoint.messagelist",
            "safepoint.migrations",
            "safepoint.refs",
            "safepoint.visible",
            "safepoint.readable",
            "safepoint.observe",
            "safepoint.version",
            "safepoint.tamper",
            "safepoint.flow",
            "safepoint.twins",
            "safepoint.forksafe",
        ),
    ),
    ("blobs and scrubber", ("safepoint.blobs", "safepoint.scrub")),
    (
        "store",
        (
            "safepoint.store",
            "safepoint.retrying",
            "safepoint.fixtures",
            "safepoint.fixture_values",
            "safepoint.migration_check",
        ),
    ),
    (
        "built on the store",
        (
            "safepoint",
            "safepoint.harness",
            "safepoint.worker",
            "safepoint.adapters",
            "safepoint.ui",
            "safepoint.cli",
            "safepoint.demo",
            "safepoint.testing",
            "safepoint.crashrig",
        ),
    ),
]
PUBLIC_API_ONLY = (
    "safepoint.cli",
    "safepoint.ui",
    "safepoint.readable",
    "safepoint.step_calls",
    "safepoint.handover",
    "safepoint.edited_fork",
    "safepoint.harness",
    "safepoint.worker",
    "safepoint.adapters",
    "safepoint.demo",
)
PUBLIC_STORE_MODULES = {"safepoint.store", "safepoint.store.admin"}
MAX_LINES = 400  # a failure above it
SEAM_HINT_LINES = 300  # a warning above it, pointing at seams
MEDIAN_LINES = (100, 250)
# A package's __init__ shorter than this only names its surface (a docstring and
# re-exports): it is no room a reader walks into, so the median leaves it out.
SMALL_INIT_LINES = 20
# Pure data: rule tables, one entry per vendor token format.
PURE_DATA: set[str] = set()


def _modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _imported(name: str, path: Path) -> Iterator[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            # `from pkg import sub` imports the submodule when there is one.
            targets = [
                f"{module}.{a.name}" if f"{module}.{a.name}" in MODULES else module for a in node.names
            ]
        else:
            continue
        for imported in targets:
            module = imported
            while module not in MODULES and "." in module:
                module = module.rpartition(".")[0]  # `import a.b.name`: the module a.b
            if module in MODULES and module != name:
                yield module


IMPORTS = {name: set(_imported(name, path)) for name, path in MODULES.items()}


def _layer(module: str) -> int:
    matches = [
        (len(p), i)
        for i, (_, prefixes) in enumerate(LAYERS)
        for p in prefixes
        if module == p or module.startswith(p + ".")
    ]
    assert matches, f"{module} is in no layer: add it to LAYERS"
    return max(matches)[1]


def _own_submodule(importer: str, imported: str) -> bool:
    return imported.startswith(importer + ".")


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root, successors_of_root in edges.items():
        if root in index:
            continue
        work = [(root, iter(sorted(successors_of_root)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(edges[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_every_layer_is_known() -> None:
    for module in MODULES:
        _layer(module)


def test_no_import_cycle() -> None:
    edges = {a: {b for b in bs if not _own_submodule(a, b)} for a, bs in IMPORTS.items()}
    assert _cycles(edges) == []


def _package(module: str) -> str:
    """The package a module is part of; a module directly under ``safepoint`` is a unit of its own."""
    if MODULES[module].name == "__init__.py":
        return module
    package = module.rpartition(".")[0]
    return module if package == "safepoint" else package


def test_no_import_cycle_between_packages() -> None:
    """No circle of imports between packages (cli -> ui -> cli), even when no two modules form one."""
    edges: dict[str, set[str]] = {_package(name): set() for name in MODULES}
    for a, bs in IMPORTS.items():
        for b in bs:
            importer, imported = _package(a), _package(b)
            if importer != imported and not _own_submodule(importer, imported):
                edges[importer].add(imported)
    assert _cycles(edges) == []


def test_imports_point_down_the_layers() -> None:
    upward = [
        f"{a} ({LAYERS[_layer(a)][0]}) imports {b} ({LAYERS[_layer(b)][0]})"
        for a, bs in sorted(IMPORTS.items())
        for b in sorted(bs)
        if _layer(b) > _layer(a) and not _own_submodule(a, b)
    ]
    assert upward == []


def test_cli_harness_adapters_demo_use_the_public_api() -> None:
    internal = [
        f"{a} imports {b}"
        for a, bs in sorted(IMPORTS.items())
        if a.startswith(PUBLIC_API_ONLY)
        for b in sorted(bs)
        if (b.startswith("safepoint.store.") and b not in PUBLIC_STORE_MODULES)
        or b.startswith("safepoint.testing")
    ]
    assert internal == []


class LongModule(UserWarning):
    """A module over ``SEAM_HINT_LINES``: a hint to look for a seam, not a failure."""


def _lines(module: str) -> int:
    return len(MODULES[module].read_text(encoding="utf-8").splitlines())


@pytest.mark.parametrize("module", sorted(set(MODULES) - PURE_DATA))
def test_module_is_at_most_400_lines(module: str) -> None:
    """No module over 400 lines; one over 300 warns, asking for a seam rather than a cut."""
    lines = _lines(module)
    assert lines <= MAX_LINES, (
        f"{module} has {lines} lines (the cap is {MAX_LINES}): divide it where its ideas divide "
        "— a subject, a layer, a reader's question — and name each part for what it holds"
    )
    if lines > SEAM_HINT_LINES:
        warnings.warn(
            LongModule(
                f"{module} has {lines} lines. If a reader has trouble finding a thing in it, cut it at a "
                "seam — a subject, a layer, a reader's question — not at a line count; if it reads as "
                "one room, leave it whole."
            ),
            stacklevel=1,
        )


def test_median_module_is_between_100_and_250_lines(capsys: pytest.CaptureFixture[str]) -> None:
    """The median module, by lines (package __init__ files under 20 lines left out), is between
    100 and 250 lines: rooms big enough to hold a subject, small enough to read."""
    sizes = [
        _lines(module)
        for module, path in MODULES.items()
        if not (path.name == "__init__.py" and _lines(module) < SMALL_INIT_LINES)
    ]
    median = statistics.median(sizes)
    with capsys.disabled():  # the figure shows in every run, not only under -s
        print(f"\nmedian module: {median} lines over {len(sizes)} modules (small __init__ files left out)")
    low, high = MEDIAN_LINES
    assert low <= median <= high, f"the median module has {median} lines"
