"""``safepoint demo``: an agent run SIGKILLed mid-run, resumed in a fresh process, finished exactly.

The demo agent (``agent.py``, on ``safepoint.Run``) works a batch of 10
documents in a child process on the embedded SQLite store: it calls a tool with an API key
from a registered secret, one that returns 200 KB, and one with a side effect that must not
happen twice. At a random point — inside a save (before its COMMIT) or right after a side
effect, before the step that records it is saved — the child is SIGKILLed. A fresh process
resumes the run from the store alone, settles the interrupted action, and finishes. The demo
checks the result against an uninterrupted run and prints what happened. Offline, seconds.
The child runs through ``safepoint.crashrig`` (what the crash-test kit is built on too); the
closing table and the lines to inspect the run are ``summary.py``'s.

    python -m safepoint.demo [STORE_URL]
"""

from __future__ import annotations

import inspect
import json
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from safepoint.crashrig.child import EntrySpec
from safepoint.crashrig.ledger import Ledger
from safepoint.crashrig.process import AgentProcess, Outcome
from safepoint.crashrig.statements import STATEMENTS_PER_SAVE
from safepoint.harness import PendingAction, Reconcile
from safepoint.model import VALUE_FIELDS, Checkpoint, Status
from safepoint.store import DEFAULT_URL, Store, open_store

from .agent import API_KEY_NAME, reconcile_hooks, run_demo_agent, store_options
from .summary import inspect_commands, summary_table

ENTRY = "safepoint.demo.agent:run_demo_agent"
OPTIONS = "safepoint.demo.agent:store_options"


@dataclass(frozen=True, slots=True)
class Expected:
    """The uninterrupted run: what the killed and resumed one must end up as."""

    final: Checkpoint
    result: Any
    effects: dict[str, Any]

    @classmethod
    def compute(cls, run_id: str, scratch: Path) -> Expected:
        with open_store("memory://", **store_options()) as memory, Ledger(scratch / "ref.db") as ledger:
            result = run_demo_agent(memory, run_id, ledger)
            return cls(memory.load(run_id), result, ledger.effects())

    def matches(self, final: Checkpoint, result: Any, effects: dict[str, Any]) -> bool:
        # What the crash kit compares (testing.crash.COMPARED): every value field
        # but the pending action, the harness's bookkeeping of how an action was settled.
        fields = ("counters", *(name for name in VALUE_FIELDS if name != "pending_action"), "status")
        same = all(getattr(final, name) == getattr(self.final, name) for name in fields)
        return (
            same
            and list(final.messages) == list(self.final.messages)
            and (result, effects)
            == (
                self.result,
                self.effects,
            )
        )


class Progress:
    """Prints a line per saved step (read back from the store by this process) and per side effect."""

    def __init__(self, console: Console, store: Store, run_id: str) -> None:
        self.console, self.store, self.run_id = console, store, run_id

    def __call__(self, line: str) -> None:
        word, _, rest = line.partition(" ")
        if word == "effect":
            absorbed = rest.endswith("absorbed")
            what = "repeated with the same key: absorbed by the service" if absorbed else "took place"
            self.console.print(f"           [magenta]side effect {what}[/]")
        if word != "saved":
            return
        cp = self.store.load(self.run_id, int(rest))
        batch, c = cp.cursors["batch"], cp.counters
        doing = f"[yellow]{cp.pending_action['tool']}[/] pending" if cp.pending_action else "committed"
        self.console.print(
            f"   step {cp.step:>2} {doing} · batch {batch['done']}/{batch['total']} · "
            f"{int(c['tokens_in']) + int(c['tokens_out']):,} tokens · {float(c['spend']):.2f}¢"
        )


def _kill(spec: EntrySpec, rng: random.Random, expected: Expected, show: Progress) -> tuple[Outcome, str]:
    """Start the run in a child and SIGKILL it at a random point; say where."""
    if rng.random() < 0.5:
        save, statement = rng.randint(6, expected.final.step - 3), rng.randint(0, STATEMENTS_PER_SAVE)
        killed = AgentProcess(spec, "--kill-in-save", f"{save}:{statement}", on_line=show).wait()
        sql = (killed.kill_point or "? ?").split(" ", 1)[1]
        return killed, f"while saving step {save - 1}, just before its {sql}"
    nth = rng.randint(1, len(expected.effects))
    child = AgentProcess(spec, "--pause-after-effect", str(nth), on_line=show)
    child.wait_for("paused")
    return child.kill(), f"right after side effect {nth}, before the step recording it was saved"


def _verdict(ledger_path: Path, pending: dict[str, Any]) -> tuple[PendingAction, Reconcile]:
    """What the agent's reconcile hook will decide about the interrupted action."""
    action = PendingAction.from_json(pending)
    with Ledger(ledger_path) as ledger:
        hook = reconcile_hooks(ledger)[action.tool]
        verdict = hook if isinstance(hook, Reconcile) else hook(action)
    assert not inspect.isawaitable(verdict)
    return action, verdict


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
    with tempfile.TemporaryDirectory() as scratch, open_store(store_url, **store_options()) as store:
        expected = Expected.compute(run_id, Path(scratch))
        spec = EntrySpec(ENTRY, store_url, Path(scratch, "ledger.db"), run_id, OPTIONS)
        console.print(f"[bold]safepoint demo[/] · store {store_url} · run [cyan]{run_id}[/] · seed {seed}")
        return _demo(console, store, spec, rng, expected)


def _demo(console: Console, store: Store, spec: EntrySpec, rng: random.Random, expected: Expected) -> int:
    run_id, show = spec.run_id, Progress(console, store, spec.run_id)
    console.print(
        "[bold]1. run[/]     in a child process, the demo agent reads 10 documents, enriches some "
        f"through an API whose key is the registered secret {API_KEY_NAME}, builds a 200 KB report "
        "and publishes it"
    )
    killed, where = _kill(spec, rng, expected, show)
    if not killed.killed:
        console.print(f"[red]the child exited ({killed.returncode}) instead of being killed[/]")
        return 1
    console.print(f"[bold red]2. SIGKILL[/] pid {killed.pid} died {where}")

    head = store.load(run_id)
    line = f"[bold]3. load[/]    a fresh connection finds step {head.step}, verified"
    decision = ""
    if head.pending_action is not None:
        action, verdict = _verdict(spec.ledger, head.pending_action)
        decision = f"{action.tool}: {verdict.decision}"
        line += f", with [yellow]{action.tool}[/] pending (key {action.key[:12]}…)"
        line += f": its reconcile hook says {verdict.decision}"
    console.print(line)

    console.print("[bold]4. resume[/]  in a fresh process, from the store alone:")
    resumed = AgentProcess(spec, on_line=show).wait()
    final = store.load(run_id)
    if resumed.returncode != 0 or final.status is not Status.DONE:
        console.print(f"[red]the resumed run did not finish (exit {resumed.returncode})[/]")
        return 1
    with Ledger(spec.ledger) as ledger:
        counts, calls, effects = ledger.counts(), len(ledger.calls()), ledger.effects()
    result = json.loads(resumed.result or "null")
    if not expected.matches(final, result, effects) or any(n != 1 for n in counts.values()):
        console.print("[red]5. check     the resumed run differs from an uninterrupted one[/]")
        return 1
    console.print(
        "[bold green]5. check[/]   same answer, messages, counters, cursors, state and side effects "
        "as an uninterrupted run; every side effect exactly once"
    )
    resumed_from = f"pid {resumed.pid} from step {head.step}" + (f" ({decision})" if decision else "")
    rows = [
        ("killed", f"pid {killed.pid}, {where}"),
        ("resumed", resumed_from),
        ("side effects", f"{len(effects)}, each exactly once ({calls} calls to the services)"),
    ]
    console.print(summary_table(store, final, rows))
    console.print("Inspect it (from this folder):")
    for command in inspect_commands(store.url, run_id, head.step):
        # soft_wrap: a long line stays one line, so it still works when pasted
        console.print(Text(f"  {command}", style="cyan"), soft_wrap=True)
    return 0
