"""``safepoint demo``: kill an agent run with SIGKILL mid-save, resume it elsewhere.

The scripted agent (``safepoint.testing.agent``) runs in a child process on the
embedded SQLite store. The child kills itself with SIGKILL in the middle of
saving a random step (at a random SQL statement of that save, before its
COMMIT); a fresh process then loads the run from the store alone and
finishes it. The demo checks the result against an uninterrupted run of the
same agent and prints what happened. Offline, a couple of seconds.

    python -m safepoint.demo [STORE_URL]
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from safepoint.model import Status
from safepoint.store import DEFAULT_URL, open_store
from safepoint.testing.agent import run_agent
from safepoint.testing.crashkit import (
    STATEMENTS_PER_SAVE,
    AgentSpec,
    kill_in_save,
    load_head,
    resume,
)

TOTAL_STEPS = 60
AGENT_SEED = 7  # the agent's work is fixed; only where the kill lands is random


def _database_bytes(store_url: str) -> int:
    """Bytes on disk of the SQLite database, its WAL and shared-memory files."""
    with open_store(store_url) as store:
        path = getattr(store.driver, "path", None)
    if path is None:
        return 0
    files = [Path(path), Path(f"{path}-wal"), Path(f"{path}-shm")]
    return sum(f.stat().st_size for f in files if f.exists())


def main(store_url: str = DEFAULT_URL) -> int:
    """Run the demo on ``store_url`` (an SQLite URL); 0 when the resumed run is exact."""
    console = Console(highlight=False)
    if not store_url.startswith("sqlite:"):
        # A child process cannot see the parent's memory:// database.
        console.print(f"[red]the demo needs an SQLite store URL, not {store_url!r}[/]")
        return 2
    seed = time.time_ns()
    rng = random.Random(seed)
    run_id = f"demo-{time.strftime('%Y%m%d-%H%M%S')}-{rng.randrange(16**4):04x}"
    spec = AgentSpec(store_url=store_url, run_id=run_id, total_steps=TOTAL_STEPS, seed=AGENT_SEED)
    kill_step = rng.randint(5, TOTAL_STEPS - 10)
    statement = rng.randint(0, STATEMENTS_PER_SAVE)
    console.print(f"[bold]safepoint demo[/] · store {store_url} · run [cyan]{run_id}[/]")
    console.print(f"random seed {seed}: the kill lands while saving step {kill_step}")

    console.print(f"[bold]1. run[/]     scripted agent, {TOTAL_STEPS} steps, in a child process …")
    killed = kill_in_save(spec, kill_step + 1, statement)  # save 1 is step 0
    if not killed.killed:
        console.print(f"[red]the child exited ({killed.returncode}) instead of being killed[/]")
        return 1
    where = (killed.kill_point or "?").split(" ", 1)[-1]
    console.print(
        f"[bold red]2. SIGKILL[/] pid {killed.pid} saved steps 0..{max(killed.saved)}, then died "
        f"saving step {kill_step}, just before [bold]{where}[/]"
    )

    head = load_head(store_url, run_id)
    if head is None or head.step != kill_step - 1:
        console.print(f"[red]expected head step {kill_step - 1} after the kill, found {head}[/]")
        return 1
    console.print(
        f"[bold]3. load[/]    a fresh connection finds step {head.step} verified "
        f"(digest {head.digest and head.digest[:12]}…); step {kill_step} left no trace"
    )

    resumed = resume(spec)
    final = load_head(store_url, run_id)
    if resumed.returncode != 0 or final is None or final.status is not Status.DONE:
        console.print(f"[red]the resumed run did not finish (exit {resumed.returncode})[/]")
        return 1
    console.print(
        f"[bold green]4. resume[/]  fresh pid {resumed.pid} continued at step {head.step + 1} "
        f"and finished at step {final.step}"
    )

    with open_store("memory://") as scratch:
        expected = run_agent(scratch, run_id, total_steps=TOTAL_STEPS, seed=AGENT_SEED)
    exact = expected.state["answer"] == final.state["answer"] and expected.counters == final.counters
    if not exact:
        console.print("[red]5. check     the resumed run differs from an uninterrupted one[/]")
        return 1
    console.print("[bold green]5. check[/]   same answer and counters as an uninterrupted run")

    with open_store(store_url) as store:
        checkpoints = len(store.history(run_id))
    table = Table(title="the resumed run", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    c = final.counters
    for what, value in [
        ("run id", run_id),
        ("status", final.status.value),
        ("steps", f"{final.step + 1} (0..{final.step})"),
        ("tokens in / out", f"{c['tokens_in']} / {c['tokens_out']}"),
        ("spend", f"{c['spend']:.4f} cents"),
        ("checkpoints stored", str(checkpoints)),
        ("database on disk", f"{_database_bytes(store_url):,} bytes (all runs in the file)"),
        ("killed while saving", f"step {kill_step} (pid {killed.pid}, before {where})"),
        ("resumed from", f"step {head.step} (pid {resumed.pid})"),
        ("answer", str(final.state["answer"])[:16] + "…"),
    ]:
        table.add_row(what, value)
    console.print(table)

    store_opt = "" if store_url == DEFAULT_URL else f" --store {store_url}"
    console.print("Inspect it:")
    for command in (
        f"safepoint runs{store_opt}",
        f"safepoint show {run_id}{store_opt}",
        f"safepoint show {run_id} --step {head.step}{store_opt}",
    ):
        console.print(f"  [cyan]{command}[/]")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
