"""The child-process side of the crash kit: run an agent in a subprocess and kill it.

``AgentProcess`` starts a child (``python -m`` of an agent module, or the
user's entry point through ``kitchild``) and reads the lines it prints; the
``kill_*`` helpers SIGKILL it at a step boundary, at a statement inside a save
(``StatementKiller``, installed in the child as the store's trace), or at a
wall-clock instant. ``crashkit`` builds its loops and checks on these.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

import safepoint

STATEMENTS_PER_SAVE = (
    4  # BEGIN, head, checkpoint (with its messages), COMMIT; +1 (the run row) on a first save
)


class CrashCheckFailed(AssertionError):
    """A crash test found a broken promise; the message says which."""


def statement_label(sql: str) -> str:
    """A short name for an SQL statement: ``INSERT INTO safepoint_messages``, ``COMMIT`` …"""
    words = " ".join(line for line in sql.splitlines() if not line.lstrip().startswith("--")).split()
    keep = {"INSERT": 3, "UPDATE": 2, "DELETE": 3, "BEGIN": 2}.get(words[0].upper(), 1) if words else 0
    return " ".join(words[:keep])


class StatementKiller:
    """A store ``trace`` that SIGKILLs this process inside its ``save``-th save.

    It dies at statement ``statement`` of that transaction (0 is ``BEGIN
    IMMEDIATE``), or at its ``COMMIT`` if the save has fewer statements — in
    both cases before the commit runs, so the step must not survive. The
    agent child installs one for ``--kill-in-save SAVE:STATEMENT``.
    """

    def __init__(self, save: int, statement: int) -> None:
        self.save, self.statement = save, statement
        self.armed = False  # set after open_store: its DDL transaction is not a save
        self._saves, self._index = 0, -1

    def __call__(self, sql: str) -> None:
        if not self.armed:
            return
        if sql == "BEGIN IMMEDIATE":
            self._saves, self._index = self._saves + 1, -1
        if self._saves == self.save:
            self._index += 1
            if self._index == self.statement or sql == "COMMIT":
                # Say where, for the parent's report; then die before the statement runs.
                print(f"kill {self._saves}:{self._index} {statement_label(sql)}", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)


class ChildSpec(Protocol):
    """What a child process runs: ``AgentSpec`` here, ``kit.EntrySpec`` for any agent."""

    def command(self, *extra: str) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """Which agent run a child process works on (see ``agent.run_agent``)."""

    store_url: str
    run_id: str
    total_steps: int = 60
    seed: int = 0
    documents: int = 20
    journal: Path | None = None

    def command(self, *extra: str) -> list[str]:
        cmd = [sys.executable, "-m", "safepoint.testing.agent", "--store", self.store_url]
        cmd += ["--run-id", self.run_id, "--total-steps", str(self.total_steps)]
        cmd += ["--seed", str(self.seed), "--documents", str(self.documents)]
        if self.journal is not None:
            cmd += ["--journal", str(self.journal)]
        return cmd + list(extra)


@dataclass(slots=True)
class Outcome:
    """How a child ended: its pid, exit code, and the steps it reported saved (durable)."""

    pid: int
    returncode: int
    saved: list[int] = field(default_factory=list)
    answer: str | None = None
    kill_point: str | None = None  # "<save>:<statement> <SQL words>" for a kill inside a save
    paused: bool = False  # it reached its --pause-after step (or the kit's --pause-after-effect)
    effects: int = 0  # side effects it reported (kit children: ``effect <n> …``)
    result: str | None = None  # the kit child's ``result <json>``: what the agent returned

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


def _child_env() -> dict[str, str]:
    # The child must import the same safepoint as this process, also when it
    # came from a checkout on sys.path rather than from site-packages — and
    # whatever else this process can import (an agent under test, say, from a
    # tests directory pytest put on sys.path).
    root = str(Path(safepoint.__file__).resolve().parent.parent)
    paths = [root, *(p for p in sys.path if p and Path(p).is_dir())]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*dict.fromkeys(paths), *filter(None, [env.get("PYTHONPATH")])])
    return env


class AgentProcess:
    """One child running the agent; reads its ``saved <step>`` lines as they come."""

    def __init__(self, spec: ChildSpec, *extra: str, on_line: Callable[[str], None] | None = None) -> None:
        self.on_line = on_line  # sees every line the child prints, as it comes
        # stderr goes to a file: a pipe nobody reads until the end could fill and block the child.
        self._errors = tempfile.TemporaryFile("w+")  # noqa: SIM115  # closed by wait()
        self.proc = subprocess.Popen(
            spec.command(*extra),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            text=True,
            env=_child_env(),
        )
        self.outcome = Outcome(self.proc.pid, 0)

    def _line(self, stream: IO[str]) -> str | None:
        line = stream.readline()
        if not line:
            return None
        word, _, rest = line.strip().partition(" ")
        if word == "saved":
            self.outcome.saved.append(int(rest))
        elif word == "paused":
            self.outcome.paused = True
        elif word == "kill":
            self.outcome.kill_point = rest
        elif word == "done":
            self.outcome.answer = rest.split()[-1]
        elif word == "effect":
            self.outcome.effects += 1
        elif word == "result":
            self.outcome.result = rest
        if self.on_line is not None:
            self.on_line(line.strip())
        return line.strip()

    def wait_for(self, prefix: str, count: int = 1) -> bool:
        """Read until the ``count``-th line starting with ``prefix``; False if the child ended."""
        assert self.proc.stdout is not None
        seen = 0
        while seen < count:
            line = self._line(self.proc.stdout)
            if line is None:
                return False
            seen += line.startswith(prefix)
        return True

    def kill(self) -> Outcome:
        """SIGKILL the child now (a no-op if it already exited) and collect its outcome."""
        self.proc.send_signal(signal.SIGKILL)
        return self.wait()

    def wait(self) -> Outcome:
        """Wait for the child to end, read the rest of its output; raise if it failed."""
        assert self.proc.stdout is not None
        while self._line(self.proc.stdout) is not None:
            pass
        self.outcome.returncode = self.proc.wait()
        self._errors.seek(0)
        errors = self._errors.read()
        for stream in (self.proc.stdin, self.proc.stdout, self._errors):
            if stream is not None:
                stream.close()
        if self.outcome.returncode not in (0, -signal.SIGKILL):
            raise CrashCheckFailed(f"agent pid {self.proc.pid} failed ({self.outcome.returncode}):\n{errors}")
        return self.outcome


def kill_at_boundary(spec: ChildSpec, step: int) -> Outcome:
    """Run until ``step`` is saved, then SIGKILL the child while it waits there."""
    child = AgentProcess(spec, "--pause-after", str(step))
    child.wait_for("paused")
    return child.kill()


def kill_in_save(spec: ChildSpec, save: int, statement: int, *, guard: int | None = None) -> Outcome:
    """The child SIGKILLs itself at SQL ``statement`` (0 = BEGIN; past the end = COMMIT) of
    its ``save``-th save; ``guard`` stops it at that step instead if it gets there first."""
    extra = ["--kill-in-save", f"{save}:{statement}"]
    if guard is not None:
        extra += ["--pause-after", str(guard)]
    child = AgentProcess(spec, *extra)
    if guard is not None and child.wait_for("paused"):
        return child.kill()
    return child.wait()


def kill_after(spec: ChildSpec, saves: int, delay: float, *, guard: int | None = None) -> Outcome:
    """SIGKILL the child ``delay`` seconds after it reported ``saves`` saves (0: after spawn).

    ``guard`` makes the child wait after saving that step, so a slow kill still
    lands (at that boundary) instead of the run finishing.
    """
    child = AgentProcess(spec, *([] if guard is None else ["--pause-after", str(guard)]))
    if saves == 0 or child.wait_for("saved", saves):
        time.sleep(delay)
    return child.kill()


def resume(spec: ChildSpec) -> Outcome:
    """Run the agent in a fresh process until it exits (done, normally)."""
    return AgentProcess(spec).wait()
