"""The side-effect ledger: a stand-in for the outside world that counts what happened.

An agent under test routes its side effects through a ``Ledger`` — a SQLite
file that outlives the processes the crash kit kills — keyed by the
idempotency key ``Run.action`` gives the tool:

* ``record(key, effect)`` is a *non-idempotent* effect (an email sent, a row
  appended): every call happens, so a repeat shows up as a duplicate;
* ``once(key, produce)`` is an *idempotent* service (a payment API with an
  idempotency key): the first call with a key happens and its value is
  kept; later calls with the key return that value and change nothing.

* ``model(key)`` is a model request reaching the provider (a paid call):
  a framework agent's scripted model notes each request it answers, keyed
  by what it was asked, so a request paid twice shows up. A model that
  notes ``{"tokens_in": …, "tokens_out": …}`` with it lets
  ``check_usage(counters)`` hold a run's counters to what was paid.

``lookup(key)`` is what a reconcile hook asks ("did this already happen?"),
and ``check_exactly_once()`` is what the kit asserts at the end: every key
took effect exactly once. ``check_calls(resent=n)`` asserts that too and
that no model request was paid twice but the ``n`` a journal reports re-sent
(in flight at a kill: the one honest gap). Each effect is durable (``synchronous=FULL``)
before the call returns, like a real service's acknowledgement.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS effects (
    seq      INTEGER PRIMARY KEY,
    key      TEXT    NOT NULL,
    kind     TEXT    NOT NULL,   -- 'record' (non-idempotent), 'once' (idempotent), 'model' (paid call)
    value    TEXT,               -- the effect, as JSON
    applied  INTEGER NOT NULL,   -- 0: an idempotent repeat, absorbed
    pid      INTEGER NOT NULL
);
-- An idempotent service applies a key once, whatever happens to its callers.
CREATE UNIQUE INDEX IF NOT EXISTS effects_once ON effects (key) WHERE kind = 'once' AND applied = 1;
"""


class DuplicateEffect(AssertionError):
    """A side effect happened more than once under one idempotency key."""


@dataclass(frozen=True, slots=True)
class Effect:
    """One call the ledger saw."""

    seq: int
    key: str
    kind: str
    value: Any
    applied: bool
    pid: int


class Ledger:
    """Side effects by idempotency key, in a SQLite file any process can open."""

    def __init__(self, path: str | os.PathLike[str], *, on_effect: Callable[[Effect], None] | None = None):
        self.path = Path(path)
        self.on_effect = on_effect  # the crash kit's child pauses here, right after an effect
        self._conn = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = FULL")
        self._conn.executescript(_SCHEMA)

    def record(self, key: str, effect: Any = None) -> None:
        """A non-idempotent effect under ``key``: it happens on every call."""
        self._notify(self._insert(key, "record", effect, applied=True))

    def model(self, key: str, request: Any = None) -> None:
        """A model request reached the provider (paid): noted under ``key``, what it was asked."""
        self._notify(self._insert(key, "model", request, applied=True))

    def once(self, key: str, produce: Callable[[], T]) -> T:
        """An idempotent effect: the first call with ``key`` runs ``produce()`` and keeps
        its (JSON) value; every later call returns that value and changes nothing."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(
                "SELECT value FROM effects WHERE key = ? AND kind = 'once' AND applied = 1", (key,)
            ).fetchone()
            value: Any = produce() if row is None else json.loads(row[0])
            effect = self._insert(key, "once", value, applied=row is None)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._notify(effect)
        return value  # type: ignore[no-any-return]

    def _insert(self, key: str, kind: str, value: Any, *, applied: bool) -> Effect:
        if not isinstance(key, str) or not key:
            raise ValueError("an effect needs a non-empty idempotency key")
        cursor = self._conn.execute(
            "INSERT INTO effects (key, kind, value, applied, pid) VALUES (?, ?, ?, ?, ?)",
            (key, kind, json.dumps(value, sort_keys=True), int(applied), os.getpid()),
        )
        assert cursor.lastrowid is not None
        return Effect(cursor.lastrowid, key, kind, value, applied, os.getpid())

    def _notify(self, effect: Effect) -> None:
        if self.on_effect is not None:
            self.on_effect(effect)

    def lookup(self, key: str) -> Any | None:
        """The value of the effect that happened under ``key`` (the first), or None."""
        row = self._conn.execute(
            "SELECT value FROM effects WHERE key = ? AND applied = 1 ORDER BY seq LIMIT 1", (key,)
        ).fetchone()
        return None if row is None else json.loads(row[0])

    def happened(self, key: str) -> bool:
        """True if an effect took place under ``key``."""
        return (
            self._conn.execute("SELECT 1 FROM effects WHERE key = ? AND applied = 1", (key,)).fetchone()
            is not None
        )

    def calls(self) -> list[Effect]:
        """Every call, in order, repeats included."""
        rows = self._conn.execute("SELECT seq, key, kind, value, applied, pid FROM effects ORDER BY seq")
        return [
            Effect(seq, key, kind, json.loads(value), bool(applied), pid)
            for seq, key, kind, value, applied, pid in rows
        ]

    def effects(self) -> dict[str, Any]:
        """What took effect, by key (the first value if a key took effect more than once)."""
        out: dict[str, Any] = {}
        for effect in self.calls():
            if effect.applied and effect.kind != "model":
                out.setdefault(effect.key, effect.value)
        return out

    def counts(self, kinds: tuple[str, ...] = ("record", "once")) -> dict[str, int]:
        """How many times each key took effect (1 is the only right answer), of the ``kinds``
        given (side effects, by default; ``("model",)``: model requests paid)."""
        out: dict[str, int] = {}
        for effect in self.calls():
            if effect.applied and effect.kind in kinds:
                out[effect.key] = out.get(effect.key, 0) + 1
        return out

    def model_calls(self) -> int:
        """How many model requests reached the provider, repeats included."""
        return sum(self.counts(("model",)).values())

    def repeated_model_calls(self) -> int:
        """How many model requests were paid again (each repeat of a key counts once)."""
        return sum(n - 1 for n in self.counts(("model",)).values())

    def check_calls(self, *, resent: int = 0) -> tuple[int, int]:
        """``check_exactly_once`` for effects, and no model request paid twice beyond the
        ``resent`` ones (in flight at a kill, as the journal counted them): raises
        ``DuplicateEffect`` naming what repeated. Returns (effects, model requests)."""
        effects = self.check_exactly_once()
        repeats = self.repeated_model_calls()
        if repeats > resent:
            twice = {key: n for key, n in self.counts(("model",)).items() if n > 1}
            listed = ", ".join(f"{key[:24]} x{n}" for key, n in sorted(twice.items()))
            raise DuplicateEffect(
                f"{repeats} model request(s) paid again, {resent} of them in flight at a kill: {listed}"
            )
        return effects, self.model_calls()

    def check_usage(self, counters: dict[str, Any]) -> dict[str, int]:
        """A journaled run's counters against what the provider was paid: the paid tokens are
        the counters' (each recorded response once) plus those of the requests paid again —
        in flight at a kill, which the counters keep apart as an estimate that also counts the
        re-sent requests a kill stopped before they reached the provider. Returns the tokens
        paid again. Each model request must have been noted with its ``tokens_in``/``tokens_out``."""
        seen: set[str] = set()
        paid = {"tokens_in": 0, "tokens_out": 0}
        again = {"tokens_in": 0, "tokens_out": 0}
        repeats = 0
        for effect in self.calls():
            if effect.kind != "model":
                continue
            first = effect.key not in seen
            seen.add(effect.key)
            repeats += not first
            for name in paid:
                paid[name] += int(effect.value[name])
                again[name] += 0 if first else int(effect.value[name])
        resent = counters.get("resent_calls", 0)
        if repeats > resent:
            raise AssertionError(f"{repeats} requests paid again, {resent} counted re-sent")
        for name, total in paid.items():
            if total != counters[name] + again[name]:
                raise AssertionError(
                    f"{name}: {total} paid, the counters say {counters[name]} + {again[name]} paid again"
                )
            if again[name] > counters.get(f"lost_{name}_estimate", 0):
                raise AssertionError(f"{name}: {again[name]} paid again, beyond the lost estimate")
        return again

    def check_exactly_once(self) -> int:
        """Raise ``DuplicateEffect`` naming each key that took effect more than once; else
        return how many keys took effect."""
        counts = self.counts()
        twice = {key: n for key, n in counts.items() if n > 1}
        if twice:
            listed = ", ".join(f"{key[:16]} x{n}" for key, n in sorted(twice.items()))
            raise DuplicateEffect(f"{len(twice)} side effect(s) happened more than once: {listed}")
        return len(counts)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
