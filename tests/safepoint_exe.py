"""The real ``safepoint`` executable, run as a user runs it: a subprocess from a given folder.

stdin is never a terminal (so a command that would ask, like ``delete``
without ``--yes``, refuses instead of waiting); ``columns`` sets the
terminal width rich lays tables out for (None: whatever the environment says).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SAFEPOINT = str(Path(sys.executable).with_name("safepoint"))


def sp(
    folder: Path, *args: str, columns: int | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **(env or {})}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run(
        [SAFEPOINT, *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
        check=False,
    )
