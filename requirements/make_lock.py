"""Write requirements/lock.txt: the exact version of every package `make test` installs.

    python requirements/make_lock.py                    # hold every pin, add what is new
    python requirements/make_lock.py --upgrade orjson   # re-resolve orjson (and what it needs)
    python requirements/make_lock.py --upgrade-all      # the newest of everything the ranges allow

pip resolves safepoint with every extra the Makefile installs (a dry run: nothing
is installed), holding the current lock as constraints except for the packages
named to upgrade, and the lock is rewritten from its report. Only the Makefile
installs with the lock; pyproject.toml keeps declaring ranges. The lock is for
this machine's kind: CPython 3.11 on Linux (CI's).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "lock.txt"
EXTRAS = "test,lint,bench,postgres,s3,langgraph,openai-agents,otel,encryption,ui,pydantic-ai,google-adk,agent-framework"  # the Makefile's install
HEADER = """\
# The exact versions `make test`, `make bench` and CI install (pip -c): only the
# Makefile uses this file; pyproject.toml declares ranges. Made by
# `make lock` (requirements/make_lock.py) on CPython 3.11, Linux; do not edit
# by hand except to bump one pin, then run `make lock` to settle the rest.
"""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, str]:
    """name -> version of each ``name==version`` line of a requirements file."""
    found: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            found[canonical(name)] = version.strip()
    return found


def resolve(held: dict[str, str]) -> dict[str, str]:
    """What pip would install for safepoint with every extra, holding ``held``."""
    with tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "held.txt"
        constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(held.items())), encoding="utf-8")
        report = Path(tmp) / "report.json"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
             "--report", str(report), "-c", str(constraints), f"{ROOT}[{EXTRAS}]"],
            check=True,
        )  # fmt: skip
        installs = json.loads(report.read_text(encoding="utf-8"))["install"]
    resolved = {canonical(i["metadata"]["name"]): i["metadata"]["version"] for i in installs}
    resolved.pop("safepoint", None)
    return resolved


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--upgrade", action="append", default=[], metavar="NAME", help="re-resolve NAME")
    parser.add_argument("--upgrade-all", action="store_true", help="re-resolve everything")
    args = parser.parse_args()
    held = {} if args.upgrade_all or not LOCK.exists() else pins(LOCK)
    for name in args.upgrade:
        held.pop(canonical(name), None)
    before = pins(LOCK) if LOCK.exists() else {}
    after = resolve(held)
    LOCK.write_text(HEADER + "".join(f"{n}=={v}\n" for n, v in sorted(after.items())), encoding="utf-8")
    for name in sorted(set(before) | set(after)):
        if before.get(name) != after.get(name):
            print(f"{name}: {before.get(name, '-')} -> {after.get(name, '-')}")


if __name__ == "__main__":
    main()
