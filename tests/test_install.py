"""Installs beside any application: ranges in pyproject.toml, a lock only the Makefile uses.

The library declares ranges (a tested lower bound, below the next major); the
Makefile installs the exact versions of requirements/lock.txt; the
lower-bounds file pins every range's lower bound for the install checks
(tests/install/checks.py, run by .ci/run). These tests check the three agree,
that each framework extra brings what its documented example imports, and
that without the postgres extra safepoint imports, and a postgresql:// URL
names the extra to install.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
LOCK = ROOT / "requirements" / "lock.txt"
LOWER_BOUNDS = ROOT / "requirements" / "lower-bounds.txt"
# Extras for the project's own tooling: the lock pins them; their ranges need not be old.
TOOLING = {"test", "lint", "bench"}
# Each framework extra, the example docs/adapters.md shows, and that page's section on it.
FRAMEWORKS = {
    "langgraph": ("examples/langgraph_example.py", "LangGraph"),
    "openai-agents": ("examples/openai_agents_example.py", "OpenAI Agents SDK"),
}


def pins(path: Path) -> dict[str, Version]:
    """The ``name==version`` lines of a requirements file (comments and blanks skipped)."""
    found: dict[str, Version] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep, f"{path.name}: {line!r} is not name==version"
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name.strip()), f"{path.name}: {line!r}"
        key = canonicalize_name(name.strip())
        assert key not in found, f"{path.name} pins {key} twice"
        found[key] = Version(version.strip())
    return found


def marker_env(extra: str) -> dict[str, str]:
    """This interpreter's marker environment, asking for ``extra``."""
    env = {key: str(value) for key, value in default_environment().items()}
    env["extra"] = extra
    return env


def requirements(extra: str | None) -> list[Requirement]:
    """The requirements of the core (``None``) or of one extra, self-references left out."""
    lines = PYPROJECT["dependencies"] if extra is None else PYPROJECT["optional-dependencies"][extra]
    reqs = [Requirement(line) for line in lines]
    return [r for r in reqs if canonicalize_name(r.name) != "safepoint"]


def user_facing() -> list[Requirement]:
    """What a user's install can bring: the core and every extra but the tooling."""
    extras = [e for e in PYPROJECT["optional-dependencies"] if e not in TOOLING]
    return [r for extra in [None, *extras] for r in requirements(extra)]


def bounds(req: Requirement) -> tuple[Version, Version]:
    """A range's lower and upper bound; it must be exactly ``>=LOW,<HIGH``."""
    ops = {spec.operator: Version(spec.version) for spec in req.specifier}
    assert len(req.specifier) == 2, f"{req}: expected >=LOW,<HIGH"
    assert set(ops) == {">=", "<"}, f"{req}: expected >=LOW,<HIGH"
    return ops[">="], ops["<"]


def test_the_lock_satisfies_every_range() -> None:
    """Every requirement pyproject.toml declares, tooling included, admits the lock's version."""
    lock = pins(LOCK)
    extras = [None, *PYPROJECT["optional-dependencies"]]
    for extra in extras:
        for req in requirements(extra):
            name = canonicalize_name(req.name)
            assert name in lock, f"{req} ({extra or 'core'}) is not in requirements/lock.txt"
            assert req.specifier.contains(lock[name], prereleases=True), (
                f"the lock's {name}=={lock[name]} is outside {req} ({extra or 'core'})"
            )
            for wanted in req.extras:  # e.g. psycopg[binary]: what the extra adds is locked too
                for dep in importlib.metadata.requires(req.name) or []:
                    dep_req = Requirement(dep)
                    if dep_req.marker and dep_req.marker.evaluate(marker_env(wanted)):
                        assert canonicalize_name(dep_req.name) in lock, f"{req}: {dep_req.name} is not locked"


def test_the_venv_has_the_locks_versions() -> None:
    """The .venv the suite runs in was installed from the lock (the Makefile's -c)."""
    for name, version in pins(LOCK).items():
        assert Version(importlib.metadata.version(name)) == version, name


def test_ranges_have_a_lower_bound_and_stop_below_the_next_major() -> None:
    """No user-facing requirement is pinned; each is >=LOW,<NEXT_MAJOR of the locked version."""
    lock = pins(LOCK)
    for req in user_facing():
        low, high = bounds(req)
        locked = lock[canonicalize_name(req.name)]
        assert low <= locked < high, req
        assert high == Version(str(locked.major + 1)), f"{req}: the next major is {locked.major + 1}"


def test_the_lower_bounds_file_pins_exactly_the_lower_bounds() -> None:
    """requirements/lower-bounds.txt names each user-facing range's lower bound, and nothing else."""
    expected: dict[str, Version] = {}
    for req in user_facing():
        name = canonicalize_name(req.name)
        low, _ = bounds(req)
        assert expected.setdefault(name, low) == low, f"{name} has two lower bounds"
    assert pins(LOWER_BOUNDS) == expected


def test_the_makefile_installs_through_the_lock() -> None:
    """The one pip install of the Makefile takes the lock as constraints, with every extra."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "LOCK   := requirements/lock.txt" in makefile
    assert "pip install --quiet -c $(LOCK) -e '.[$(EXTRAS)]'" in makefile
    (extras,) = re.findall(r"^EXTRAS := (\S+)$", makefile, re.MULTILINE)
    assert set(extras.split(",")) == set(PYPROJECT["optional-dependencies"])


def test_ci_runs_the_install_checks() -> None:
    """.ci/run runs make install-checks after make test, under set -e, so a failed check fails CI."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "set -euo pipefail" in ci
    assert ci.index("make test") < ci.index("make install-checks")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "install-checks: $(STAMP)\n\t$(PY) tests/install/checks.py\n" in makefile


_IMPORT_LINE = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\s|import\s+([\w.]+))", re.MULTILINE)


def _imported_modules(source: str) -> set[str]:
    """The modules a piece of code imports, dotted (a docs excerpt need not parse: regex then)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {a or b for a, b in _IMPORT_LINE.findall(source)}
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
    return modules


@functools.cache
def _owners() -> dict[str, str]:
    """Each installed ``.py`` file, as a path inside site-packages -> the distribution that has it."""
    owners: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        owners.update((file.as_posix(), name) for file in dist.files or [] if file.suffix == ".py")
    return owners


def _distribution_of(module: str) -> str:
    """The distribution whose files hold ``module``, found without importing it.

    By file, not by top-level name: namespace packages span several distributions
    (``langgraph.graph`` is langgraph's, ``langgraph.checkpoint`` langgraph-checkpoint's).
    """
    path = module.replace(".", "/")
    for candidate in (f"{path}.py", f"{path}/__init__.py"):
        if candidate in _owners():
            return _owners()[candidate]
    raise AssertionError(f"no installed distribution has the module {module}")


def _closure(reqs: list[Requirement]) -> set[str]:
    """Every distribution that installing ``reqs`` brings, walked through the installed metadata."""
    names: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = list(reqs)
    while todo:
        req = todo.pop()
        key = (canonicalize_name(req.name), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        names.add(key[0])
        envs = [marker_env(extra) for extra in req.extras or {""}]
        for line in importlib.metadata.requires(req.name) or []:
            dep = Requirement(line)
            if dep.marker is None or any(dep.marker.evaluate(env) for env in envs):
                todo.append(dep)
    return names


def _section(markdown: str, title: str) -> str:
    """The text of one ``## title`` section of a page."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", markdown, re.MULTILINE | re.DOTALL)
    assert match, title
    return match.group(1)


@pytest.mark.parametrize("extra", sorted(FRAMEWORKS))
def test_each_framework_extra_installs_what_its_documented_example_imports(extra: str) -> None:
    """`pip install safepoint[extra]`, all docs/adapters.md says to install, is all its code needs."""
    example, title = FRAMEWORKS[extra]
    docs = (ROOT / "docs" / "adapters.md").read_text(encoding="utf-8")
    (row,) = [row for row in docs.splitlines() if row.startswith(f"| {title} |") and "pip install" in row]
    assert f"`pip install 'safepoint[{extra}]'`" in row or f"`pip install safepoint[{extra}]`" in row, row
    sources = [(ROOT / example).read_text(encoding="utf-8")]
    for block in re.findall(r"```python\n(.*?)```", _section(docs, title), re.DOTALL):
        sources.append(block.split("# after\n", 1)[-1])  # "# before" shows the code it replaces
    modules = set().union(*map(_imported_modules, sources))
    ours = set(sys.stdlib_module_names) | {"__future__", "safepoint"}
    modules = {m for m in modules if m.split(".")[0] not in ours}
    assert modules, f"{example} imports nothing from the {extra} extra?"
    needed = {_distribution_of(module) for module in modules}
    brought = _closure([*requirements(None), *requirements(extra)])
    assert needed <= brought, f"safepoint[{extra}] does not bring {sorted(needed - brought)}"


# -- without the postgres extra ------------------------------------------------------------------

# Run in a fresh interpreter in which psycopg cannot be imported, as in an install without the extra.
_WITHOUT_PSYCOPG = """
import sys
sys.modules["psycopg"] = None
sys.modules["psycopg_pool"] = None
"""

_LOADED = """
import json, sys
import safepoint, safepoint.cli
optional = {"psycopg", "psycopg_pool", "boto3", "botocore", "langgraph", "langchain_core", "agents",
            "opentelemetry"}
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & optional)))
"""

_CHECKS = """
import asyncio, json, tempfile
import safepoint
errors = {}
def attempt(label, call):
    try:
        call()
    except safepoint.SafepointError as exc:
        extra = getattr(exc, "extra", None)
        errors[label] = [type(exc).__name__, str(exc), isinstance(exc, ImportError), extra]
def import_backend():
    import safepoint.store.postgres
URL = "postgresql://someone:hunter2@127.0.0.1:9/nowhere"
attempt("open_store", lambda: safepoint.open_store(URL))
attempt("open_async_store", lambda: asyncio.run(safepoint.open_async_store(URL)))
attempt("import", import_backend)
with tempfile.TemporaryDirectory() as tmp, safepoint.open_store(f"sqlite:///{tmp}/s.db") as store:
    store.save(safepoint.Checkpoint(run_id="r", messages=[{"role": "user", "content": "hi"}]))
    sqlite_ok = store.load("r").messages == [{"role": "user", "content": "hi"}]
print(json.dumps({"errors": errors, "sqlite": sqlite_ok}))
"""


def test_import_safepoint_loads_no_optional_package() -> None:
    """`import safepoint` (and its CLI) import no extra's package, so a core-only install imports."""
    out = subprocess.run([sys.executable, "-c", _LOADED], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_without_psycopg_postgres_names_the_extra_and_sqlite_works() -> None:
    """Without psycopg: opening or importing the PostgreSQL backend is a MissingExtra naming the extra."""
    out = subprocess.run(
        [sys.executable, "-c", _WITHOUT_PSYCOPG + _CHECKS], capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout)
    assert result["sqlite"] is True
    assert set(result["errors"]) == {"open_store", "open_async_store", "import"}
    for kind, message, is_import_error, extra in result["errors"].values():
        assert kind == "MissingExtra"
        assert message == "the PostgreSQL store needs the 'postgres' extra: pip install 'safepoint[postgres]'"
        assert is_import_error
        assert extra == "postgres"


def test_without_psycopg_the_cli_prints_one_line_naming_the_extra(tmp_path: Path) -> None:
    """The CLI on a postgresql:// URL without the extra: one line, the usage exit code, no traceback."""
    script = _WITHOUT_PSYCOPG + "from safepoint.cli import main\nmain()\n"
    url = "postgresql://someone:hunter2@127.0.0.1:9/nowhere"
    done = subprocess.run(
        [sys.executable, "-c", script, "runs", "--store", url],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1
    assert "pip install 'safepoint[postgres]'" in done.stderr
    assert "hunter2" not in done.stderr + done.stdout
    assert list(tmp_path.iterdir()) == []
