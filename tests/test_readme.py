"""The README's tour runs as written, and every CLI command is documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from safepoint.cli import main as cli_main

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_blocks_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ```python block of the README runs, in order, in a fresh folder."""
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    assert len(blocks) >= 4
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # the README is ours to run
    assert (tmp_path / ".safepoint" / "state.db").exists()


def test_every_cli_command_is_in_the_readme() -> None:
    """Each `safepoint` subcommand appears in the README's command-line section."""
    text = README.read_text(encoding="utf-8")
    for name in cli_main.list_commands(None):  # type: ignore[arg-type]
        assert f"safepoint {name}" in text, name
