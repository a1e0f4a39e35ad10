"""The parent side of a crash: run an agent in a child process and SIGKILL it.

``AgentProcess`` starts a child (``python -m`` of an agent module, or the
user's entry point through ``child.py``) and reads the lines it prints; the
``kill_*`` helpers SIGKILL it at a step boundary, at a statement inside a save
(``statements.StatementKiller``, installed in the child as the store's trace),
right after a side effect, or at a wall-clock instant. The crash-test kit
(``safepoint.testing.crash``) and the demo build their scenarios on these.
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


class CrashCheckFailed(AssertionError):
    """A crash test found a broken promise; the message says which."""


class ChildSpec(Protocol):
    """What a child process runs: ``child.EntrySpec`` for any agent entry point, or the
    crash kit's ``AgentSpec`` for its scripted agent."""

    def command(self, *extra: str) -> list[str]: ...


@dataclass(slots=True)
class Outcome:
    """How a child ended: its pid, exit code, and the steps it reported saved (durable)."""

    pid: int
    returncode: int
    saved: list[int] = field(default_factory=list)
    answer: str | None = None
    kill_point: str | None = None  # "<save>:<statement> <SQL words>" for a kill inside a save
    paused: bool = False  # it reached its --pause-after step (or an entry-point child's --pause-after-effect)
    effects: int = 0  # side effects it reported (entry-point children: ``effect <n> …``)
    result: str | None = None  # an entry-point child's ``result <json>``: what the agent returned

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
        """Read until the ``count``-th line starting with ``prefix``; False if the child ended or
        paused first (a paused child prints nothing more until it is killed: waiting on would
        never end)."""
        assert self.proc.stdout is not None
        seen = 0
        while seen < count:
            line = self._line(self.proc.stdout)
            if line is None:
                return False
            seen += line.startswith(prefix)
            if seen < count and line.startswith("paused"):
                return False
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


def kill_after_effect(spec: ChildSpec, effects: int, *, guard: int) -> Outcome:
    """SIGKILL the child right after its ``effects``-th side effect — between the effect and
    the save that records it — or at step ``guard`` if it gets there first (an entry-point
    child: ``child.EntrySpec``, whose ledger reports the effects)."""
    child = AgentProcess(spec, "--pause-after-effect", str(effects), "--pause-after", str(guard))
    child.wait_for("paused")
    return child.kill()


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
