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


# A write transaction that opens with one of these only moves a lease (an open Run's
# hold, its heartbeat, its release): it is not a save, and is not counted as one.
_LEASE_ONLY = "UPDATE safepoint_runs SET lease_"
# Nor is a call journal's write (an intent, a result: the query ``call_run`` opens it):
# the steps a kill aims at are checkpoints.
_JOURNAL = "SELECT r.id, (SELECT max(id) FROM safepoint_checkpoints"


class StatementKiller:
    """A store ``trace`` that SIGKILLs this process inside its ``save``-th save.

    It dies at statement ``statement`` of that transaction (0 is ``BEGIN
    IMMEDIATE``), or at its ``COMMIT`` if the save has fewer statements — in
    both cases before the commit runs, so the step must not survive. The
    agent child installs one for ``--kill-in-save SAVE:STATEMENT``.

    Saves are the write transactions but those that only move a lease
    (``_LEASE_ONLY``) or write to the call journal (``_JOURNAL``). Which
    kind a transaction is shows at its first statement, so the kill aimed
    at a ``BEGIN IMMEDIATE`` lands just after it, before that first
    statement runs: the save has written nothing either way.
    """

    def __init__(self, save: int, statement: int) -> None:
        self.save, self.statement = save, statement
        self.armed = False  # set after open_store: its DDL transaction is not a save
        self._saves, self._index = 0, -1
        self._begun = False  # a write transaction began; its first statement says what it is

    def __call__(self, sql: str) -> None:
        if not self.armed:
            return
        if sql == "BEGIN IMMEDIATE":
            self._begun, self._index = True, 0
            return
        if self._begun:
            self._begun = False
            if _body(sql).startswith((_LEASE_ONLY, _JOURNAL)):
                self._index = -1
                return
            self._saves += 1
            if self._saves == self.save and self.statement == 0:
                self._die("BEGIN IMMEDIATE")
        if self._saves == self.save and self._index >= 0:
            self._index += 1
            if self._index == self.statement or sql == "COMMIT":
                self._die(statement_label(sql))

    def _die(self, label: str) -> None:
        # Say where, for the parent's report; then die before the statement runs.
        print(f"kill {self._saves}:{self._index} {label}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


def _body(sql: str) -> str:
    """The statement's text without its comment lines, on one line."""
    return " ".join(" ".join(line for line in sql.splitlines() if not line.lstrip().startswith("--")).split())
