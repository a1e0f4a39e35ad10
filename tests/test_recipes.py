"""The counted recipes of docs/architecture.md stay true.

Each "Recipe:" section names how many files the change touches ("Four
files") and lists them as numbered steps; the count and the steps must agree.
Where the tree can say it, the count is checked against the tree itself:

- add a checkpoint field: the patch that adds a ``notes`` field by the recipe
  (``tests/seams/notes_field.patch``, applied and round-tripped by
  tests/test_seams_fields.py) touches exactly that many files;
- add a backend: every backend of the table (``store/backends.py``) that
  brings a dialect of its own has the files the recipe lists — its driver,
  its ``queries.sql`` answering every query spec that is not optional, its
  first DDL revision, its row in ``query_specs.DIALECTS`` — and its scheme is
  one ``urls.scheme_of`` accepts;
- add a store method: every entry of the call table (``store/methods/``) is a
  method of both ``Store`` and ``AsyncStore``, from that one entry;
- add a framework adapter: every shipped adapter has each of the eight files
  the recipe lists.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

from safepoint.store import AsyncStore, Store
from safepoint.store.backends import BACKENDS
from safepoint.store.methods import StoreMethods
from safepoint.store.query_specs import DIALECTS, QUERY_SPECS, load_dialect
from safepoint.store.twins import StoreMethod
from safepoint.store.urls import scheme_of

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
URLS = {"sqlite": "sqlite:///x.db", "memory": "memory://", "postgresql": "postgresql://u@h/db"}


def _recipes() -> dict[str, str]:
    parts = re.split(r"^### Recipe: (.+)$", ARCHITECTURE, flags=re.M)
    return {parts[i].strip(): parts[i + 1].split("\n## ")[0] for i in range(1, len(parts), 2)}


RECIPES = _recipes()


def _stated(name: str) -> int:
    match = re.search(r"\b(" + "|".join(NUMBERS) + r") files\b", RECIPES[name], flags=re.I)
    assert match, f"recipe {name!r} does not say how many files it touches"
    return NUMBERS[match[1].lower()]


@pytest.mark.parametrize(
    "name", ["add a store method", "add a backend", "add a checkpoint field", "add a framework adapter"]
)
def test_each_recipe_states_its_count_and_lists_as_many_steps(name: str) -> None:
    steps = [int(n) for n in re.findall(r"^(\d+)\.", RECIPES[name], flags=re.M)]
    steps += [int(n) for n in re.findall(r"^\d+\. and (\d+)\.", RECIPES[name], flags=re.M)]
    assert max(steps) == _stated(name)


def test_the_field_recipe_is_the_patch_that_adds_a_field() -> None:
    patch = (ROOT / "tests" / "seams" / "notes_field.patch").read_text(encoding="utf-8")
    touched = set(re.findall(r"^\+\+\+ b/(\S+)", patch, flags=re.M))
    assert len(touched) == _stated("add a checkpoint field")
    for path in touched:
        assert (
            f"`{Path(path).name}`" in RECIPES["add a checkpoint field"]
            or path in RECIPES["add a checkpoint field"]
        )


def test_every_backend_has_the_files_the_backend_recipe_lists() -> None:
    required = {name for name, spec in QUERY_SPECS.items() if not spec.optional}
    for scheme, backend in BACKENDS.items():
        assert backend.scheme == scheme
        assert scheme_of(URLS[scheme]) == scheme
        if scheme not in DIALECTS:
            continue  # memory:// is the SQLite driver on an in-memory database
        package, filenames, placeholder = DIALECTS[scheme]
        folder = resources.files(package)
        assert folder.joinpath("driver.py").is_file()
        assert folder.joinpath("ddl", "0001_initial.sql").is_file()
        sub = package.rpartition(".")[2]
        queries = load_dialect("safepoint.store", [f"{sub}/{f}" for f in filenames], placeholder)
        assert required <= set(queries), f"{scheme} lacks {sorted(required - set(queries))}"
    assert set(DIALECTS) <= set(BACKENDS)


def test_every_call_table_entry_is_a_method_of_both_faces() -> None:
    entries = {
        name
        for klass in StoreMethods.__mro__
        for name, value in vars(klass).items()
        if isinstance(value, StoreMethod)
    }
    assert len(entries) > 20
    for name in entries:
        assert callable(getattr(Store, name)), name
        assert callable(getattr(AsyncStore, name)), name


# The shipped adapters: (module under safepoint.adapters, extra, the pinned distribution).
ADAPTERS = [
    ("langgraph", "langgraph", "langgraph"),
    ("openai_agents", "openai-agents", "openai-agents"),
    ("pydantic_ai", "pydantic-ai", "pydantic-ai-slim"),
    ("google_adk", "google-adk", "google-adk"),
    ("agent_framework", "agent-framework", "agent-framework-core"),
]


@pytest.mark.parametrize(("module", "extra", "distribution"), ADAPTERS)
def test_every_adapter_has_the_files_the_adapter_recipe_lists(
    module: str, extra: str, distribution: str
) -> None:
    assert _stated("add a framework adapter") == 8
    adapters = ROOT / "src" / "safepoint" / "adapters"
    assert (adapters / f"{module}.py").is_file() or (adapters / module / "__init__.py").is_file()  # 1
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(rf"^{re.escape(extra)} = \[", pyproject, flags=re.M)  # 2
    assert re.search(rf"safepoint\[[^\]]*\b{re.escape(extra)}\b", pyproject)
    extras = re.search(r"^EXTRAS\s*:=\s*(\S+)", (ROOT / "Makefile").read_text(encoding="utf-8"), flags=re.M)
    assert extras is not None
    assert extra in extras[1].split(",")  # 3
    lock = (ROOT / "requirements" / "lock.txt").read_text(encoding="utf-8")
    assert re.search(rf"^{re.escape(distribution)}==", lock, flags=re.M)  # 4
    assert (ROOT / "tests" / f"test_adapter_{module}.py").is_file()  # 5
    assert (ROOT / "examples" / f"{module}_example.py").is_file()  # 6
    assert f"safepoint.adapters.{module}" in (ROOT / "docs" / "adapters.md").read_text(encoding="utf-8")  # 7
    assert module in (ROOT / "src" / "safepoint" / "frameworks.py").read_text(encoding="utf-8")  # 8


@pytest.mark.parametrize("module", [module for module, _, _ in ADAPTERS])
def test_every_adapter_has_the_files_the_journal_recipe_lists(module: str) -> None:
    """Every adapter is journaled, with each of the seven files the recipe lists."""
    assert _stated("journal a framework") == 7
    adapter = ROOT / "src" / "safepoint" / "adapters" / module
    journal = (adapter / "journal.py").read_text(encoding="utf-8")  # 1
    assert "safepoint.journal" in journal or "from safepoint.journal" in (adapter / "__init__.py").read_text(
        encoding="utf-8"
    )
    assert (ROOT / "tests" / f"test_journal_{module}.py").is_file()  # 2
    crash = (ROOT / "tests" / f"test_journal_{module}_crash.py").read_text(encoding="utf-8")  # 3
    assert "pytest.mark.crash" in crash
    assert "check_usage" in crash or "check_usage" in _helpers_of(crash)
    page = f"journal-{module.replace('_', '-')}.md"
    assert (ROOT / "docs" / page).is_file()  # 4
    assert f"({page})" in (ROOT / "docs" / "journal.md").read_text(encoding="utf-8")  # 5
    assert (ROOT / "bench" / "workloads" / f"journal_{module}.py").is_file()  # 6
    frameworks = (ROOT / "bench" / "sections" / "journal_frameworks.py").read_text(encoding="utf-8")
    assert f'"workloads.journal_{module}"' in frameworks  # 7


def _helpers_of(test: str) -> str:
    """The text of the helper modules a test imports (``from helpers import x`` / ``helpers.x``)."""
    names = re.findall(r"from helpers(?:\.(\w+))? import (\w+)", test)
    found = []
    for package_module, name in names:
        path = ROOT / "tests" / "helpers" / f"{package_module or name}.py"
        if path.is_file():
            found.append(path.read_text(encoding="utf-8"))
    return "\n".join(found)
