"""What ``safepoint demo`` shows at the end: the run's summary table (what was stored —
secret references, offloaded blobs, bytes on disk) and the shell lines that inspect it."""

from __future__ import annotations

import inspect
import os
import shlex
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from rich.table import Table

from safepoint.blobs.base import BLOB_KEY
from safepoint.model import Checkpoint
from safepoint.store import Store


def _blob_digests(value: Any, into: set[str]) -> None:
    if isinstance(value, dict):
        body = value.get(BLOB_KEY)
        if isinstance(body, dict) and "sha256" in body:
            into.add(str(body["sha256"]))
            return
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            _blob_digests(item, into)


def stored_checkpoints(store: Store, run_id: str, last: int) -> tuple[Counter[str], int | None]:
    """The run's secret references (by rule, from each save's scrub report) and the number
    of distinct blobs its checkpoints reference — None while the store cannot load a
    checkpoint with its blob references left in place (no blob offload)."""
    load: Any = store.load
    with_refs = "fetch_blobs" in inspect.signature(load).parameters
    references: Counter[str] = Counter()
    digests: set[str] = set()
    for step in range(last + 1):
        cp = load(run_id, step, fetch_blobs=False) if with_refs else load(run_id, step)
        references.update(cp.scrub_report.by_rule())  # counts by rule, never values
        if with_refs:
            _blob_digests(cp.to_dict(), digests)
    return references, len(digests) if with_refs else None


def _database_bytes(store: Store) -> int:
    """Bytes on disk of the SQLite database and what sits beside it (WAL, shared memory, blobs)."""
    path = getattr(store.driver, "path", None)
    if path is None:
        return 0
    main = Path(path)
    files = [f for near in main.parent.glob(main.name + "*") for f in [near, *near.rglob("*")]]
    return sum(f.stat().st_size for f in files if f.is_file())


def cli_command() -> str:
    """How to call this installation's ``safepoint`` from the current folder.

    ``safepoint`` when that is what PATH finds; otherwise the script beside this Python,
    relative when it is under the current folder (``make demo`` prints ``.venv/bin/safepoint``);
    ``python -m safepoint.cli`` when no script was installed.
    """
    script = Path(os.path.abspath(Path(sys.executable).parent / "safepoint"))
    if not script.is_file():
        return shlex.join([sys.executable, "-m", "safepoint.cli"])
    found = shutil.which("safepoint")
    if found is not None and Path(os.path.abspath(found)) == script:
        return "safepoint"
    try:
        return shlex.quote(str(script.relative_to(Path.cwd())))
    except ValueError:
        return shlex.quote(str(script))


def inspect_commands(store_url: str, run_id: str, step: int) -> list[str]:
    """Shell lines that inspect the demo's run, naming the store it used; each works when pasted."""
    cli, store = cli_command(), ["--store", store_url]
    return [
        f"{cli} {shlex.join(['runs', *store])}",
        f"{cli} {shlex.join(['show', run_id, *store])}",
        f"{cli} {shlex.join(['show', run_id, '--step', str(step), *store])}",
    ]


def summary_table(store: Store, final: Checkpoint, rows: list[tuple[str, str]]) -> Table:
    references, blobs = stored_checkpoints(store, final.run_id, final.step)
    secrets = ", ".join(f"{n} x {rule}" for rule, n in sorted(references.items())) or "none"
    c = final.counters
    table = Table(title=f"run {final.run_id}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    for what, value in [
        ("status", final.status.value),
        ("steps", f"{c['steps']} agent steps, {c['actions']} actions"),
        (
            "tokens in / out",
            f"{c['tokens_in']:,} / {c['tokens_out']:,} (budget {c.get('budget_tokens', '-'):,})",
        ),
        ("spend", f"{float(c['spend']):.2f} cents (budget {c.get('budget_spend', '-')})"),
        ("checkpoints", f"{final.step + 1} (steps 0..{final.step}), each verified"),
        ("bytes stored", f"{_database_bytes(store):,} (the database and its files: all its runs)"),
        ("secrets referenced", f"{secrets}: references stored, never the value"),
        (
            "blobs offloaded",
            "n/a (this store does not offload large values)" if blobs is None else str(blobs),
        ),
        *rows,
        ("answer", str(final.state.get("answer"))[:16] + "…"),
    ]:
        table.add_row(what, value)
    return table
