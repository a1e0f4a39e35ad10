"""Stores seeded with one hostile value everywhere a redaction must reach, and a counter of its forms.

``seed(store, n, seed=..., value=VALUE, big=...)`` fills any open store (SQLite or
PostgreSQL, plain or encrypted, blobs anywhere) with ``n`` runs, the same ones for the
same seed: the value in messages, state, the pending action, cursors, a label, journal
entries and blobs (a message, a text and a bytes value longer than ``big`` bytes: open
the store with ``blob_threshold`` below it), each time raw, JSON-escaped inside a
``json.dumps``'d string, and base64. Some runs are forked (the forks hold copies of
their parent's messages) and some hold no value at all.

``occurrences(value, sources)`` counts every form a stored value can take — raw UTF-8,
JSON-escaped once or twice (non-ASCII escaped or not), base64 and base64url at any
alignment — in files, folders (walked) and byte strings: a redaction leaves 0.
"""

from __future__ import annotations

import base64
import json
import random
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from safepoint import Checkpoint

# A quote, a backslash and a non-ASCII letter (JSON escapes them), no token or PII shape:
# the default rules leave it, so only a redaction naming it takes it out.
VALUE = 'Qv"7\\ü-kelp-orbit-2291'

# Places the value is put; each run holds the value in all of them (runs without it, in none).
PLACES = ("messages", "state", "pending_action", "cursors", "labels", "journal", "blobs")


@dataclass(slots=True)
class Seeded:
    run_ids: list[str] = field(default_factory=list)  # every run made, forks included
    holding: list[str] = field(default_factory=list)  # the runs whose stored content holds the value
    forks: dict[str, str] = field(default_factory=dict)  # fork id -> parent id
    clean: list[str] = field(default_factory=list)  # runs never given the value


def forms(value: str) -> dict[str, list[bytes]]:
    """Each form a stored copy of ``value`` can take, by name: the byte strings to look for."""
    raw = value.encode("utf-8")
    once = json.dumps(value)[1:-1]
    once_utf8 = json.dumps(value, ensure_ascii=False)[1:-1]
    out = {
        "raw": [raw],
        "json": sorted({once.encode(), once_utf8.encode()}),
        "json-twice": sorted(
            {
                json.dumps(once)[1:-1].encode(),
                json.dumps(once_utf8, ensure_ascii=False)[1:-1].encode(),
                json.dumps(once_utf8)[1:-1].encode(),
            }
        ),
        "base64": [],
    }
    for offset in range(3):  # the value at any alignment inside a longer base64 text
        data = b"\0" * offset + raw
        whole = len(data) // 3 * 4
        start = 4 if offset else 0
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            core = encode(data)[start:whole]
            if core not in out["base64"]:
                out["base64"].append(core)
    return out


def occurrences(value: str, sources: Iterable[Path | bytes]) -> Counter[str]:
    """How many times each form of ``value`` occurs in ``sources`` (files, folders walked, bytes)."""
    found: Counter[str] = Counter()
    needles = forms(value)
    for data in _contents(sources):
        for name, patterns in needles.items():
            found[name] += sum(data.count(pattern) for pattern in patterns)
    return found


def _contents(sources: Iterable[Path | bytes]) -> Iterable[bytes]:
    for source in sources:
        if isinstance(source, bytes):
            yield source
        elif source.is_dir():
            yield from (path.read_bytes() for path in sorted(source.rglob("*")) if path.is_file())
        elif source.exists():
            yield source.read_bytes()


def seed(
    store: Any,
    n: int,
    *,
    seed: int = 37,
    value: str = VALUE,
    big: int = 300,
    forks: int = 3,
    threads: int = 8,
) -> Seeded:
    """``n`` runs in ``store``, deterministic for ``seed``; one in ten holds no value, and the
    first ``forks`` holding runs get a fork from their step 0 (its own steps after)."""
    done = Seeded()
    for index in range(n):
        run_id = f"run-{seed}-{index:05d}"
        done.run_ids.append(run_id)
        (done.holding if index % 10 != 9 else done.clean).append(run_id)

    def one(index: int) -> None:
        rng = random.Random(f"{seed}-{index}")  # each run its own: the same runs, in any order
        run_id = done.run_ids[index]
        _one_run(store, run_id, value if run_id in holding else _filler(rng), rng, big)

    holding = set(done.holding)
    # Runs saved from threads share commits (a store's group commit): far fewer fsyncs.
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(n)))
    rng = random.Random(seed)
    for parent in done.holding[:forks]:
        fork = store.fork(parent, 0, new_run_id=f"fork-of-{parent}")
        fork = fork.next()
        fork.messages.append({"role": "user", "content": f"fork turn {rng.randrange(10**6)}"})
        store.save(fork)
        done.forks[fork.run_id] = parent
        done.run_ids.append(fork.run_id)
        done.holding.append(fork.run_id)
    return done


def _filler(rng: random.Random) -> str:
    return "plain-" + "".join(rng.choice("abcdefghjkmnpqrstuvwxyz") for _ in range(16))


def _one_run(store: Any, run_id: str, value: str, rng: random.Random, big: int) -> None:
    raw = value.encode("utf-8")
    b64 = base64.b64encode(raw).decode()
    nonce = rng.randrange(10**9)
    padding = "lorem ipsum " * (big // 12 + 1)
    cp = Checkpoint(
        run_id=run_id,
        messages=[
            {"role": "user", "content": f"my key is {value}, nonce {nonce}"},
            {"role": "tool", "content": json.dumps({"out": value, "n": nonce})},  # JSON-escaped twice
        ],
        state={"note": value, "encoded": b64, "as_json": json.dumps([value]), "small": b"ab" + raw},
        cursors={"page": {"after": value}},
        labels={"ticket": f"t-{nonce} {value}", "tier": "gold"},
    )
    store.save(cp)
    # One journal entry (each is a commit of its own): the value small, escaped, and in a blob.
    journal = {"hit": value, "b64": b64, "json": json.dumps({"q": value}), "page": padding + value}
    store.record_call(run_id, "search#1", journal)
    cp = cp.next()
    cp.messages.append({"role": "assistant", "content": padding + value + f" {nonce}"})  # a blob
    cp.state["blob"] = b"\x00\xff" * (big // 2) + raw  # a bytes blob
    cp.state["report"] = padding + json.dumps({"v": value})  # a text blob holding its JSON form
    cp.pending_action = {"tool": "send", "args": {"to": value, "b64": b64}}
    store.save(cp)
