"""Public modules that moved keep working at their old paths: importing one warns
(DeprecationWarning) and gives the very objects the new place has."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

# old path -> (new path, {old name: where the new place has it}); other names keep their name.
MOVED = {
    "safepoint.testing.kit": ("safepoint.testing.crash", {"crash_kit": "plugin.crash_kit"}),
    "safepoint.testing.crashkit": ("safepoint.testing.crash", {"CrashReport": "LoopReport"}),
    "safepoint.testing.ledger": ("safepoint.testing.crash", {}),
}


def _new_home(package: str, where: str) -> object:
    module_name, _, name = f"{package}.{where}".rpartition(".")
    return getattr(importlib.import_module(module_name), name)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_warns_and_gives_the_same_objects(old: str) -> None:
    """Importing the old path warns, naming the new one, and each of its public names is the
    object the new place exports."""
    new, renamed = MOVED[old]
    sys.modules.pop(old, None)  # a module warns when it is first imported
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = importlib.import_module(old)
    names = {*module.__all__, *renamed}
    for name in sorted(names):
        assert getattr(module, name) is _new_home(new, renamed.get(name, name)), f"{old}.{name}"


def test_new_paths_import_without_a_warning() -> None:
    """The new places (and conformance, which kept its path as a package) import silently."""
    code = "import safepoint.testing.crash, safepoint.testing.crash.plugin, safepoint.testing.conformance"
    code += ", safepoint.testing.migrations, safepoint.demo"
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
