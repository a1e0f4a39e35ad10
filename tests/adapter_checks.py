"""What every framework adapter's tests check the same way: that its example runs as documented.

``run_example("pydantic_ai", tmp_path)`` runs ``examples/pydantic_ai_example.py`` in a subprocess,
offline, on a fresh SQLite file in ``tmp_path``, as a user would (``python examples/…``), and returns
its output lines; a non-zero exit fails with its stderr. (That importing an adapter without its
framework names the extra is checked for every adapter at once: test_adapters_missing_extra.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def run_example(name: str, tmp_path: Path) -> list[str]:
    example = ROOT / "examples" / f"{name}_example.py"
    done = subprocess.run(
        [sys.executable, str(example), f"sqlite:///{tmp_path / 'example.db'}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()
