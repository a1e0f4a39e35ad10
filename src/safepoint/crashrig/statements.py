"""Killing a child inside a save: the store ``trace`` that SIGKILLs its own process at a
chosen SQL statement, before the COMMIT, so the save being made must leave no trace.

It runs in the child (installed by ``child.py`` and the scripted agent for
``--kill-in-save SAVE:STATEMENT``); the parent only reads the ``kill …`` line it
prints just before dying.
"""

from __future__ import annotations

import os
import signal

STATEMENTS_PER_SAVE = (
    4  # BEGIN, head, checkpoint (with its messages), COMMIT; +1 (the run row) on a first save
)


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
