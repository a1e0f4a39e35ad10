"""The crash kit as a pytest fixture: ``crash_kit("pkg.mod:run_agent", **options)``.

Enable it with ``pytest_plugins = ["safepoint.testing.crash.plugin"]`` in a
conftest.py. A module of its own because it needs pytest, and the kit itself does not.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .checks import CrashReport
from .runner import crash_test


@pytest.fixture
def crash_kit(tmp_path: Path) -> Callable[..., CrashReport]:
    """``crash_kit("pkg.mod:run_agent", **options)``: ``crash_test`` in this test's tmp_path.
    Enable with ``pytest_plugins = ["safepoint.testing.crash.plugin"]`` in a conftest.py."""

    def run(entry: str, **options: Any) -> CrashReport:
        return crash_test(entry, tmp_path / "crash-kit", **options)

    return run
