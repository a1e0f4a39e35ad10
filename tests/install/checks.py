"""Install checks: safepoint's wheel in fresh venvs, resolved against the package registry.

    .venv/bin/python tests/install/checks.py [--only NAME ...] [--keep]
    make install-checks                      # the same; .ci/run runs it after make test

- ``beside-older``: an application's rich, click, boto3 and orjson, one major
  below the lock's versions (one minor where our range has no older major),
  then safepoint[s3] installed beside them, changing none of them; the smoke
  test then passes (tests/install/smoke.py --s3).
- ``core-only``: safepoint alone (the lock's versions): the venv holds the
  standard library and the core dependencies, no psycopg; ``import safepoint``
  and the SQLite store work, a postgresql:// URL names the extra, the CLI
  prints one line (smoke.py --core-only).
- ``lower-bounds``: safepoint with every extra, requirements/lower-bounds.txt
  as constraints (every range's lower bound, checked installed exactly), then
  the CLI and SQLite tests (``LOWER_BOUND_TESTS``), the adapter and
  OpenTelemetry tests (``EXTRA_LOWER_BOUND_TESTS``) and the blob tests (S3 on
  moto: ``S3_SUBSET``) against it: the wheel installed, not the source tree.
- ``newest-frameworks``: the Pydantic AI, ADK and Agent Framework extras
  unpinned (the registry's newest release; everything else at the lock), then
  their adapter and journal tests and the conversation view
  (``NEWEST_FRAMEWORK_TESTS``). The lock follows a newer release that passes
  (``make lock UPGRADE="pkg"``).

The wheel is built once; the venvs install side by side (pip mostly waits on
the registry; nothing is byte-compiled ahead, only what the tests import),
then the checks run one at a time. Each check's output goes to
its log in the work folder, whose tail is shown when it fails. The last line
is ``install-checks: N passed, N failed``; the exit status is non-zero when any
failed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
LOCK = ROOT / "requirements" / "lock.txt"
LOWER_BOUNDS = ROOT / "requirements" / "lower-bounds.txt"
# What an application already has, older: one major (or minor) below the lock.
OLDER = ("rich", "click", "boto3", "orjson")
# The CLI tests (every file, as they grow) and the SQLite tests of the core's
# dependencies: orjson (codec), click and rich (CLI), ahocorasick-rs (scrubber),
# zstandard (blobs), run against the lower bounds.
LOWER_BOUND_TESTS = (
    "tests/test_cli*.py",
    "tests/test_conformance.py",
    "tests/test_codec.py",
    "tests/test_scrub_secrets.py",
    "tests/test_scrub_rules.py",
    "tests/test_untrusted.py",
    "tests/test_harness.py",
    "tests/test_readme.py",
)
# The extras' lower bounds: the adapters (their examples included), S3 through moto, OpenTelemetry.
EXTRA_LOWER_BOUND_TESTS = (
    "tests/test_adapter_langgraph.py",
    "tests/test_adapter_langgraph_memo.py",
    "tests/test_adapter_langgraph_conformance.py",
    "tests/test_journal_langgraph*.py",
    "tests/test_adapter_openai_agents.py",
    "tests/test_journal_openai_agents.py",
    "tests/test_journal_openai_agents_crash.py",
    "tests/test_adapters_missing_extra.py",
    "tests/test_observe_otel.py",
    "tests/test_ui_guard.py",
)
# tests/test_blobs.py: the filesystem store's tests (zstandard), and of the S3 ones,
# boto3's part (conditional put, get, head, delete, list): each S3 test sets up a
# bucket on moto's server, so a few of them rather than all 80.
BLOB_SUBSET = (
    "not s3 and not S3 or s3 and (round_trip or conditional or scan or delete_is or missing_digest"
    " or open_blob_store)"
)
# Test tooling for the lower-bound venvs, at the lock's versions.
TEST_TOOLS = (
    "pytest",
    "pytest-timeout",
    "pytest-xdist",
    "hypothesis",
    "httpx",
)  # httpx: Starlette's TestClient
USER_EXTRAS = "postgres,s3,langgraph,openai-agents,otel,encryption,ui"
# Left out of the lower-bounds venv: google-adk needs an OpenTelemetry newer than the
# otel extra's lower bound, and each framework's bound is the lock's version (make test).
FRAMEWORK_EXTRAS = ("pydantic-ai", "google-adk", "agent-framework")


# The newest release of each of FRAMEWORK_EXTRAS runs its adapter's and its journal's tests, and
# the conversation view over all five frameworks' stored shapes.
NEWEST_FRAMEWORK_TESTS = (
    "tests/test_adapter_pydantic_ai*.py",
    "tests/test_adapter_google_adk*.py",
    "tests/test_adapter_agent_framework*.py",
    "tests/test_journal_pydantic_ai*.py",
    "tests/test_journal_google_adk*.py",
    "tests/test_journal_agent_framework*.py",
    "tests/test_conversations_shown.py",
)


class CheckFailed(Exception):
    """One check failed; the message says how."""


def pins(path: Path) -> dict[str, Version]:
    found: dict[str, Version] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            found[canonicalize_name(name)] = Version(version)
    return found


def ranges() -> dict[str, Requirement]:
    """Each user-facing requirement of pyproject.toml (the core and every non-tooling extra), by name."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = list(project["dependencies"])
    for extra, reqs in project["optional-dependencies"].items():
        if extra not in {"test", "lint", "bench"}:
            lines += reqs
    reqs = [Requirement(line) for line in lines]
    return {canonicalize_name(r.name): r for r in reqs if canonicalize_name(r.name) != "safepoint"}


def older_than_lock(name: str) -> str:
    """``name<X``: one major below the lock's version, or one minor where the range allows no older major."""
    locked = pins(LOCK)[name]
    low = min(Version(s.version) for s in ranges()[name].specifier if s.operator == ">=")
    if low.major < locked.major:
        return f"{name}<{locked.major}"
    if (low.major, low.minor) < (locked.major, locked.minor):
        return f"{name}<{locked.major}.{locked.minor}"
    raise CheckFailed(f"{name}'s range starts at the lock's minor: nothing older to install beside")


class Venv:
    """One check's fresh venv (of the Python running this script: its base, not .venv) and its log."""

    def __init__(self, folder: Path, name: str) -> None:
        self.path = folder / name
        self.python = self.path / "bin" / "python"
        self.log = folder / f"{name}.log"

    def run(
        self, what: str, argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> None:
        """Run a step, its output appended to the log; a failure raises CheckFailed with the log's tail."""
        with self.log.open("a", encoding="utf-8") as log:
            log.write(f"\n$ {' '.join(argv)}\n")
            log.flush()
            done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env, check=False)
        if done.returncode != 0:
            lines = self.log.read_text(encoding="utf-8").splitlines()
            tail = [line for line in lines if not line.startswith("WARNING: Location")][
                -40:
            ]  # local-index noise
            raise CheckFailed(f"{what} exited {done.returncode}:\n    " + "\n    ".join(tail))

    def create(self) -> None:
        self.run("venv", [sys.executable, "-m", "venv", str(self.path)])

    def pip_install(self, *args: str) -> None:
        argv = [str(self.python), "-m", "pip", "install", "-q", "--no-input", "--disable-pip-version-check"]
        argv.append("--no-compile")  # CPU saved: Python compiles what the checks import, once
        self.run("pip install", [*argv, *args])

    def version(self, name: str) -> Version:
        code = f"import importlib.metadata as m; print(m.version({name!r}))"
        out = subprocess.run([str(self.python), "-c", code], capture_output=True, text=True, check=True)
        return Version(out.stdout.strip())

    def smoke(self, *flags: str) -> None:
        self.run("smoke test", [str(self.python), str(HERE / "smoke.py"), *flags], cwd=self.path)

    def pytest(self, patterns: tuple[str, ...], *options: str) -> None:
        """The test files matching ``patterns``, run from the checkout by this venv's Python.

        tests/ holds no safepoint (src/ is not on the path), so the tests import the
        installed wheel; -n 2 as make test does.
        """
        files = [str(p.relative_to(ROOT)) for pattern in patterns for p in sorted(ROOT.glob(pattern))]
        if not files:
            raise CheckFailed(f"no test file matches {patterns}")
        argv = [str(self.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", *options, *files]
        self.run("pytest", argv, cwd=ROOT)


class Check:
    """An install (run concurrently with the other checks' installs: pip mostly waits on the
    registry) and then a verification (run alone: the tests use both cores)."""

    name = ""

    def install(self, venv: Venv, wheel: Path) -> None:
        raise NotImplementedError

    def verify(self, venv: Venv) -> str:
        raise NotImplementedError


class BesideOlder(Check):
    name = "beside-older"

    def __init__(self) -> None:
        self.before: dict[str, Version] = {}

    def install(self, venv: Venv, wheel: Path) -> None:
        # The application first, then safepoint into it: pip must keep the application's versions.
        venv.pip_install(*(older_than_lock(name) for name in OLDER))
        self.before = {name: venv.version(name) for name in OLDER}
        venv.pip_install(f"{wheel}[s3]")

    def verify(self, venv: Venv) -> str:
        lock = pins(LOCK)
        got = {name: venv.version(name) for name in OLDER}
        for name, version in got.items():
            if version != self.before[name]:
                raise CheckFailed(f"installing safepoint moved {name} from {self.before[name]} to {version}")
            if version >= lock[name] or not ranges()[name].specifier.contains(version):
                raise CheckFailed(f"{name} {version}: not below the lock's {lock[name]} within our range")
        venv.smoke("--s3")
        return ", ".join(f"{n} {v} (lock {lock[n]})" for n, v in got.items())


class CoreOnly(Check):
    name = "core-only"

    def install(self, venv: Venv, wheel: Path) -> None:
        venv.pip_install("-c", str(LOCK), str(wheel))

    def verify(self, venv: Venv) -> str:
        venv.smoke("--core-only")
        return "no psycopg; postgresql:// names the extra"


class LowerBounds(Check):
    name = "lower-bounds"

    def install(self, venv: Venv, wheel: Path) -> None:
        lock = pins(LOCK)
        tools = _tools((*TEST_TOOLS, "langgraph-checkpoint-conformance"))
        tools.append(f"moto[server]=={lock['moto']}")
        # The lock's SQLite saver needs a newer langgraph-checkpoint than our lower bound.
        tools.append("langgraph-checkpoint-sqlite>=3.1.1,<4")
        venv.pip_install("-c", str(LOWER_BOUNDS), f"{wheel}[{USER_EXTRAS}]", *tools)

    def verify(self, venv: Venv) -> str:
        bounds = pins(LOWER_BOUNDS)
        for name, bound in bounds.items():
            if name in framework_packages():
                continue
            got = venv.version(name)
            if got != bound:
                raise CheckFailed(f"{name} installed at {got}, not its lower bound {bound}")
        venv.pytest((*LOWER_BOUND_TESTS, *EXTRA_LOWER_BOUND_TESTS))
        venv.pytest(("tests/test_blobs.py",), "-k", BLOB_SUBSET)
        core = [canonicalize_name(name) for name in ("orjson", "click", "rich", "psycopg", "boto3")]
        return ", ".join(f"{n}=={bounds[n]}" for n in core) + ", …"


class NewestFrameworks(Check):
    """The newest release of each framework extra (unpinned; everything else at the lock) running
    the adapters' and journals' tests: a release that changed an interface shows up here first."""

    name = "newest-frameworks"

    def install(self, venv: Venv, wheel: Path) -> None:
        unpinned = framework_only_packages()
        lines = LOCK.read_text(encoding="utf-8").splitlines()
        kept = [line for line in lines if _pinned_name(line) not in unpinned]
        constraints = venv.path.parent / f"{self.name}-constraints.txt"
        constraints.write_text("\n".join(kept) + "\n", encoding="utf-8")
        tools = _tools(TEST_TOOLS)
        # langgraph and openai-agents too: the conversation view's test drives all five frameworks;
        # postgres: the suite's conftest imports psycopg.
        extras = ",".join((*FRAMEWORK_EXTRAS, "langgraph", "openai-agents", "postgres"))
        venv.pip_install("-c", str(constraints), f"{wheel}[{extras}]", *tools)

    def verify(self, venv: Venv) -> str:
        lock = pins(LOCK)
        got = {name: venv.version(name) for name in sorted(framework_packages())}
        venv.pytest(NEWEST_FRAMEWORK_TESTS)
        return ", ".join(f"{n} {v} (lock {lock[n]})" for n, v in got.items())


def framework_only_packages() -> set[str]:
    """The framework extras' packages and what they alone bring (their own libraries: a newer
    release needs newer ones — pydantic-ai-slim its pydantic-graph), read from the installed
    metadata of the environment running this script (the .venv, installed from the lock): all a
    newer framework release may move, nothing the core or the other extras also need."""
    installed = {canonicalize_name(d.metadata["Name"]): d for d in importlib.metadata.distributions()}

    def closure(roots: set[str]) -> set[str]:
        seen: set[str] = set()
        todo = list(roots)
        while todo:
            name = todo.pop()
            if name in seen or name not in installed:
                continue
            seen.add(name)
            for line in installed[name].requires or []:
                req = Requirement(line)
                if req.marker is None or req.marker.evaluate({"extra": ""}):
                    todo.append(canonicalize_name(req.name))
        return seen

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    others = list(project["dependencies"])
    others += [line for extra, reqs in extras.items() if extra not in FRAMEWORK_EXTRAS for line in reqs]
    shared = closure({canonicalize_name(Requirement(line).name) for line in others} - {"safepoint"})
    return framework_packages() | (closure(framework_packages()) - shared)


def _pinned_name(line: str) -> str | None:
    name = line.split("#", 1)[0].strip().partition("==")[0]
    return canonicalize_name(name) if name else None


def framework_packages() -> set[str]:
    """The packages of FRAMEWORK_EXTRAS, which the lower-bounds venv does not install."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    return {canonicalize_name(Requirement(line).name) for extra in FRAMEWORK_EXTRAS for line in extras[extra]}


def _tools(names: tuple[str, ...]) -> list[str]:
    lock = pins(LOCK)
    return [f"{name}=={lock[canonicalize_name(name)]}" for name in names]


CHECKS = {check.name: check for check in (BesideOlder(), CoreOnly(), LowerBounds(), NewestFrameworks())}


def _build_wheel(folder: Path) -> Path:
    dist = folder / "dist"
    Venv(folder, "build").run(
        "build", [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)]
    )
    (wheel,) = dist.glob("safepoint-*.whl")
    return wheel


def _prepare(check: Check, venv: Venv, wheel: Path) -> None:
    venv.create()
    check.install(venv, wheel)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", action="append", choices=sorted(CHECKS), help="run only this check")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (venvs, wheel, logs)")
    args = parser.parse_args()
    chosen = [CHECKS[name] for name in args.only or CHECKS]
    folder = Path(tempfile.mkdtemp(prefix="safepoint-install-checks-"))
    folder.chmod(0o755)  # the read-only CLI tests run the venv's safepoint as uid nobody
    passed = failed = 0
    started = time.monotonic()
    try:
        wheel = _build_wheel(folder)
        venvs = {check.name: Venv(folder, check.name) for check in chosen}
        with ThreadPoolExecutor(max_workers=len(chosen)) as pool:
            installs = {c.name: pool.submit(_prepare, c, venvs[c.name], wheel) for c in chosen}
        print(
            f"install checks: {len(chosen)} venvs installed in {time.monotonic() - started:.0f} s", flush=True
        )
        for check in chosen:
            begin = time.monotonic()
            try:
                installs[check.name].result()
                detail = check.verify(venvs[check.name])
            except CheckFailed as exc:
                failed += 1
                print(
                    f"install check {check.name}: FAILED ({time.monotonic() - begin:.0f} s): {exc}",
                    flush=True,
                )
            else:
                passed += 1
                print(
                    f"install check {check.name}: ok in {time.monotonic() - begin:.0f} s ({detail})",
                    flush=True,
                )
    except CheckFailed as exc:
        failed += 1
        print(f"install checks: cannot build the wheel: {exc}", flush=True)
    finally:
        if args.keep:
            print(f"install checks: work folder kept at {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"install checks took {time.monotonic() - started:.0f} s")
    print(f"install-checks: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
