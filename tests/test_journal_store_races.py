"""Writers racing on one call journal key keep exactly one result (issue 32, item 1): threads
on every backend (sync and ``AsyncStore``), and processes on one SQLite file and one
PostgreSQL schema; every loser is handed the winner's result. And the journal's cost is flat
in the run's length: the same statements for a run of 1 step and of 500 (counted with
``QueryLog``, never timed).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from journal_stores import SYNC_VARIANTS, VARIANTS, Backend, backends, opened, started
from safepoint.testing.conformance import QueryLog, grow

KEYS = 12
THREADS = 6


@pytest.fixture(params=VARIANTS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backends(request.param, tmp_path)


@pytest.fixture(params=SYNC_VARIANTS)
def sync_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backends(request.param, tmp_path)


def _check_one_winner(seen: dict[str, list[tuple[bool, Any]]], store: Any, writers: int) -> None:
    """Each key: written by exactly one writer, and every writer handed the one stored result."""
    assert sorted(seen) == sorted(f"key-{n}" for n in range(KEYS))
    for key, outcomes in seen.items():
        assert len(outcomes) == writers
        winners = [result for written, result in outcomes if written]
        assert len(winners) == 1, (key, outcomes)
        assert all(result == winners[0] for _, result in outcomes), (key, outcomes)
        found = store.recorded_call("run", key)
        assert found is not None
        assert (found.state, found.result) == ("done", winners[0])


def test_threads_racing_on_a_key_keep_one_result(backend: Backend) -> None:
    store = backend.open()
    started(store, "run")
    handles = [backend.open() for _ in range(THREADS)]
    start = threading.Barrier(THREADS)
    seen: dict[str, list[tuple[bool, Any]]] = defaultdict(list)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        own = handles[n]
        try:
            start.wait()
            for k in range(KEYS):
                key = f"key-{k}"
                if (n + k) % 3 == 0:  # some write the intent first, as a tool with an effect does
                    own.call_intent("run", key)
                entry = own.record_call("run", key, {"writer": n, "key": k})
                with lock:
                    seen[key].append((entry.written, entry.result))
        except BaseException as exc:  # reported below: a thread's failure must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    _check_one_winner(seen, store, THREADS)


def test_threads_racing_on_an_intent_write_it_once(backend: Backend) -> None:
    store = backend.open()
    started(store, "run")
    handles = [backend.open() for _ in range(THREADS)]
    start = threading.Barrier(THREADS)
    written: list[bool] = []

    def intend(n: int) -> None:
        start.wait()
        written.append(handles[n].call_intent("run", "pay", request={"amount": 5}).written)

    threads = [threading.Thread(target=intend, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(written) == [False] * (THREADS - 1) + [True]


RACER = r"""
import json, os, sys, time
import safepoint
url, schema, name, go = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
options = {"schema": schema, "min_size": 0, "max_size": 2} if schema else {}
store = safepoint.open_store(url, **options)
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
seen = []
for k in range(int(sys.argv[5])):
    entry = store.record_call("run", f"key-{k}", {"writer": name, "k": k, "pid": os.getpid()})
    seen.append([entry.key, entry.written, entry.result])
store.close()
print(json.dumps(seen))
"""


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_processes_racing_keep_one_result(kind: str, tmp_path: Path) -> None:
    with opened(kind, tmp_path) as backend:
        store = backend.open()
        started(store, "run")
        go = tmp_path / "go"
        racers = [
            subprocess.Popen(
                [sys.executable, "-c", RACER, backend.url, backend.schema or "", f"p{n}", str(go), str(KEYS)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(2)
        ]
        for racer in racers:  # both opened the store: then both start at once
            assert racer.stdout is not None
            assert racer.stdout.readline().strip() == "ready"
        go.write_text("go")
        seen: dict[str, list[tuple[bool, Any]]] = defaultdict(list)
        for racer in racers:
            out, err = racer.communicate(timeout=120)
            assert racer.returncode == 0, err
            for key, written, result in json.loads(out):
                seen[key].append((written, result))
        _check_one_winner(seen, store, 2)


# -- cost flat in the run's length ------------------------------------------------------------


def test_the_cost_of_a_call_is_flat_in_the_run_length(sync_backend: Backend) -> None:
    store = sync_backend.open()
    grow(store, "short", 1)
    grow(store, "long", 500, per_step=1)
    log = QueryLog(store)
    short, long = [], []
    for run_id, out in (("short", short), ("long", long)):
        log.take()
        store.call_intent(run_id, "intent", request={"q": 1})
        store.record_call(run_id, "intent", {"r": 1}, request={"q": 1})  # an intent completed
        store.record_call(run_id, "fresh", {"r": 2})  # a new entry
        store.record_call(run_id, "fresh", {"r": 3})  # an entry stored first by another
        store.recorded_call(run_id, "fresh", request={"q": 1})
        store.recorded_call(run_id, "absent")
        store.recorded_calls(run_id, step=store.run(run_id).head_step + 1)
        out += [(q.name, sorted(q.params)) for q in log.take() if q.name != "run_info"]
    assert short == long
    names = [name for name, _ in short]
    # A write: the run's row and the put, which says what it stored (nothing read back); a
    # put that finds the key taken reads the entry there; a read: one key lookup; a step's
    # entries: the run's row and one ranged read. No statement scans the run's checkpoints.
    intent = ["call_run", "call_intent"]
    done = ["call_run", "call_done"]
    first_wins = ["call_run", "call_done", "call_get"]  # found done: the entry handed back
    reads = ["call_get", "call_get", "lease_state", "calls_of_run"]
    assert names == [*intent, *done, *done, *first_wins, *reads]
