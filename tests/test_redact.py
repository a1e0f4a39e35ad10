"""Redaction after the fact on SQLite (issue 37): ``store.redact`` takes a value out of every
message, header, journal entry and blob — raw, JSON-escaped and base64 — on plain and
encrypted files, blobs in files or in the database; every run still verifies and resumes, a
registered secret resolves again, a dry run writes nothing, and a writer holding a run from
before the redaction cannot write the value back. The CLI and the audit trail as operators
see them are in ``test_redact_cli.py``; seeding and counting in ``redact_seed.py``.
"""

from __future__ import annotations

import asyncio
import base64
import re
import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import safepoint
from redact_seed import VALUE, occurrences, seed
from safepoint import Checkpoint, Conflict, Keyring, Redaction, SecretRef, Secrets, Store
from safepoint.harness import Run
from safepoint.store.admin import verify_store

THRESHOLD = 256  # the seeded blobs are longer: they go to the blob target
MARK = "[REDACTED:value-1]"


def keyring() -> Keyring:
    index, key = (base64.b64encode(bytes([byte]) * 32).decode() for byte in (7, 17))
    return Keyring.from_text(f"index:{index} k1:{key}")


def files_of(db: Path) -> list[Path]:
    """Where a SQLite store's bytes are: the file, its WAL and the blob folder beside it."""
    return [db, Path(f"{db}-wal"), Path(f"{db}.blobs")]


def assert_gone(db: Path) -> None:
    found = occurrences(VALUE, files_of(db))
    assert sum(found.values()) == 0, dict(found)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


@pytest.fixture
def opened() -> Iterator[list[Store]]:
    stores: list[Store] = []
    yield stores
    for store in stores:
        store.close()


def open_at(db: Path, opened: list[Store], **options: Any) -> Store:
    opened.append(safepoint.open_store(f"sqlite:///{db}", blob_threshold=THRESHOLD, **options))
    return opened[-1]


def resumes(store: Store, run_id: str) -> Checkpoint:
    """The run loads, and a next step on it saves: it is still a run an agent can go on with."""
    cp = store.load(run_id)
    after = cp.next()
    after.messages.append({"role": "user", "content": "after the redaction"})
    store.save(after)
    return cp


def test_a_thousand_runs_keep_no_form_of_the_value(db: Path, opened: list[Store]) -> None:
    store = open_at(db, opened)
    seeded = seed(store, 1000)
    before = occurrences(VALUE, files_of(db))
    assert all(before[form] > 0 for form in ("raw", "json", "json-twice", "base64")), dict(before)
    clean_heads = {run_id: store.load(run_id).digest for run_id in seeded.clean}

    done = store.redact(Redaction(values=[VALUE]))

    assert done.ok
    assert not done.left
    assert done.forks == []
    assert {run.run_id for run in done.runs} == set(seeded.holding)
    assert done.runs_scanned == len(seeded.run_ids)
    assert set(done.counts) == {"secret:value-1"}
    assert done.blobs_deleted > 0  # the blobs that held the value, unreferenced now
    assert_gone(db)
    for run_id, digest in clean_heads.items():  # nothing found: not rewritten
        assert store.history(run_id)[-1].digest == digest
    with ThreadPoolExecutor(8) as pool:  # threads: their saves share commits
        resumed = dict(zip(seeded.run_ids, pool.map(partial(resumes, store), seeded.run_ids), strict=True))
    for run_id in seeded.holding:
        cp = resumed[run_id]
        assert MARK in cp.messages[0]["content"]
        assert cp.state["note"] == MARK
        assert cp.cursors["page"]["after"] == MARK
        assert cp.labels["ticket"].endswith(MARK)
        assert cp.labels["tier"] == "gold"
        if run_id not in seeded.forks:  # a fork's own step 1 has no pending action
            assert cp.pending_action == {"tool": "send", "args": {"to": MARK, "b64": MARK}}
    report = verify_store(store)  # every stored step: the redacted ones and those saved since
    assert report.ok, report.failures[:3]
    assert sorted(record["run_id"] for record in report.redactions) == sorted(seeded.holding)
    assert_gone(db)


def test_the_forks_of_a_chosen_run_are_redacted_and_listed(db: Path, opened: list[Store]) -> None:
    store = open_at(db, opened)
    seeded = seed(store, 6, forks=2)
    (fork, parent), (other_fork, _other_parent) = seeded.forks.items()
    done = store.redact(Redaction(values=[VALUE]), run_ids=[parent])
    assert [run.run_id for run in done.runs] == [parent, fork]
    assert done.forks == [fork]
    assert MARK in store.load(fork).messages[0]["content"]  # the fork's copy of the parent's rows
    assert VALUE in store.load(other_fork).messages[0]["content"]  # not chosen: as it was
    again = store.redact(Redaction(values=[VALUE]), labels={"tier": "gold"})
    assert {run.run_id for run in again.runs} == set(seeded.holding) - {parent, fork}
    assert again.forks == []  # a fork carries its parent's labels: chosen itself, not as a fork
    assert verify_store(store).ok
    assert_gone(db)
    for run_id in seeded.run_ids:
        resumes(store, run_id)


CONFIGS = {
    "encrypted, blobs in files, a secret": ({"encryption": keyring()}, "secret"),
    "encrypted, blobs in the database, a value": ({"encryption": keyring(), "blobs": "database"}, "value"),
    "plain, blobs in the database, a value": ({"blobs": "database"}, "value"),
    "plain, blobs in files, a secret": ({}, "secret"),
}


@pytest.mark.parametrize("config", CONFIGS, ids=list(CONFIGS))
def test_thirty_runs_on_each_configuration(db: Path, opened: list[Store], config: str) -> None:
    options, how = CONFIGS[config]
    store = open_at(db, opened, **options)
    seeded = seed(store, 30)
    plain = "encryption" not in options
    assert (sum(occurrences(VALUE, files_of(db)).values()) > 0) == plain  # sealed: never in the file
    originals = {run_id: _content(store, run_id) for run_id in seeded.holding}
    journal = {run_id: store.recorded_calls(run_id) for run_id in seeded.holding}
    secrets = Secrets().add("API_KEY", VALUE)
    redaction = Redaction(secrets=secrets) if how == "secret" else Redaction(values=[VALUE])

    done = store.redact(redaction)

    assert done.ok
    assert {run.run_id for run in done.runs} == set(seeded.holding)
    assert set(done.counts) == {"secret:API_KEY" if how == "secret" else "secret:value-1"}
    assert_gone(db)
    report = verify_store(store)
    assert report.ok, report.failures[:3]
    assert len(report.redactions) == len(seeded.holding)
    reader = open_at(db, opened, secrets=secrets, **options)  # a store that knows the secret
    for run_id in seeded.holding:
        stored = store.load(run_id)
        assert VALUE not in str(_content(store, run_id))
        if how == "secret":  # a reference where it was: resolved on load, in every form it had
            assert stored.state["note"] == SecretRef("API_KEY")
            # Every form it had comes back; a bytes value cannot hold a reference: a save marks it.
            assert _content(reader, run_id, resolve=True) == _bytes_marked(originals[run_id])
            resolved = reader.recorded_calls(run_id, resolve_secrets=True)
            assert [entry.result for entry in resolved] == [entry.result for entry in journal[run_id]]
        else:
            assert stored.state["note"] == MARK
        resumes(store, run_id)
    assert verify_store(store).ok


def _content(store: Store, run_id: str, *, resolve: bool = False) -> list[Any]:
    """What a redaction may rewrite in a run (labels aside: they take markers, never references)."""
    out: list[Any] = []
    for info in store.history(run_id):
        cp = store.load(run_id, info.step, resolve_secrets=resolve)
        out.append((list(cp.messages), cp.state, cp.pending_action, cp.cursors))
    return out


def _bytes_marked(value: Any) -> Any:
    """``value`` as a save knowing the secret stores it: bytes that held it marked whole."""
    if isinstance(value, bytes):
        return b"[REDACTED:secret:API_KEY]" if VALUE.encode() in value else value
    if isinstance(value, dict):
        return {key: _bytes_marked(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(map(_bytes_marked, value))
    return value


def test_a_dry_run_counts_and_changes_no_byte(db: Path, opened: list[Store]) -> None:
    store = open_at(db, opened)
    seeded = seed(store, 12)
    store.close()
    store = open_at(db, opened)
    files = [db, Path(f"{db}-wal"), *sorted(Path(f"{db}.blobs").rglob("*"))]
    before = {path: path.read_bytes() for path in files if path.is_file()}

    dry = store.redact(Redaction(values=[VALUE], rules=["jwt"]), dry_run=True)

    assert dry.dry_run
    assert dry.ok
    assert dry.blobs_deleted == 0
    assert {run.run_id for run in dry.runs} == set(seeded.holding)
    assert all(run.record is None and run.found > 0 for run in dry.runs)
    assert {path: path.read_bytes() for path in files if path.is_file()} == before
    assert sorted(Path(f"{db}.blobs").rglob("*")) == files[2:]  # no blob written either
    assert all(store.redactions(run_id) == [] for run_id in seeded.run_ids)
    done = store.redact(Redaction(values=[VALUE], rules=["jwt"]))  # the counts were the real ones
    assert done.counts == dry.counts
    assert {run.run_id: (run.counts, run.steps) for run in done.runs} == {
        run.run_id: (run.counts, run.steps) for run in dry.runs
    }


def test_a_rerun_completes_its_record_and_adds_none(db: Path, opened: list[Store]) -> None:
    store = open_at(db, opened)
    seeded = seed(store, 3, forks=0)
    run_id = seeded.holding[0]
    first = store.redact(Redaction(values=[VALUE]))
    again = store.redact(Redaction(values=[VALUE]))
    assert again.runs == []
    assert first.runs
    (record,) = store.redactions(run_id)
    assert record.intact
    assert record.named == {"secrets": [], "rules": [], "pii": [], "values": 1}
    assert record.counts == dict(first.runs[0].counts)
    assert record.steps == first.runs[0].steps
    store.redact(Redaction(values=["never-stored-value", VALUE]))  # another request: a record of its own
    assert len(store.redactions(run_id)) == 1  # ...only where it found something
    store.save(store.load(run_id).next().evolve(state={"late": VALUE}))
    store.redact(Redaction(values=[VALUE]))  # the same request again, with something new to find
    (record,) = store.redactions(run_id)  # completed: one record, its counts grown
    assert record.found == first.runs[0].found + 1


def test_values_in_ids_label_keys_and_adapter_labels_are_left_and_counted(
    db: Path, opened: list[Store]
) -> None:
    store = open_at(db, opened)
    hostile = f"run {VALUE}"
    store.save(
        Checkpoint(
            run_id=hostile,
            messages=[{"role": "user", "content": VALUE}],
            labels={f"k {VALUE}": "v", "safepoint.thread": VALUE, "note": VALUE},
        )
    )
    done = store.redact(Redaction(values=[VALUE]))
    (run,) = done.runs
    assert run.left == {"run id": 1, "label key": 1, "adapter label": 1}
    cp = store.load(hostile)
    assert cp.labels == {f"k {VALUE}": "v", "safepoint.thread": VALUE, "note": MARK}
    assert cp.messages[0]["content"] == MARK
    assert verify_store(store).ok


def test_a_run_held_across_the_redaction_gets_conflict_and_reloads(db: Path, opened: list[Store]) -> None:
    store = open_at(db, opened)
    run = Run.open(store, "held", state={"note": VALUE})
    run.append({"role": "user", "content": f"hello {VALUE}"})
    run.commit()
    run.append({"role": "assistant", "content": "next"})
    other = open_at(db, opened)
    assert other.redact(Redaction(values=[VALUE])).runs
    with pytest.raises(Conflict):
        run.commit()
    run = Run.open(store, "held")  # reloaded: the redacted step
    assert run.state["note"] == MARK
    assert run.messages[0]["content"] == f"hello {MARK}"
    run.append({"role": "assistant", "content": "next"})
    run.commit()
    assert_gone(db)
    assert verify_store(store).ok


def test_a_store_whose_memory_holds_the_run_cannot_write_the_value_back(
    db: Path, opened: list[Store]
) -> None:
    writer = open_at(db, opened)
    conversation = [{"role": "user", "content": f"key {VALUE}"}]  # a harness's own list
    writer.save(Checkpoint(run_id="r", messages=list(conversation), state={"v": VALUE}))
    other = open_at(db, opened)
    assert other.redact(Redaction(values=[VALUE])).runs
    conversation.append({"role": "assistant", "content": "ok"})
    with pytest.raises(Conflict):  # built fresh from what it held: planned on the value's rows
        writer.save(Checkpoint(run_id="r", step=1, messages=list(conversation), state={"v": VALUE}))
    redacted = writer.load("r")  # it reloads, and builds the next step from there
    fresh = Checkpoint(
        run_id="r",
        step=redacted.step + 1,
        messages=[*redacted.messages, {"role": "assistant", "content": "ok"}],
        state=dict(redacted.state),
    )
    writer.save(fresh)  # the Conflict let go of the memory that caused it
    assert_gone(db)
    assert [m["content"] for m in other.load("r").messages] == [f"key {MARK}", "ok"]
    assert other.load("r").state == {"v": MARK}
    assert verify_store(other).ok


def test_an_edit_of_a_redacted_row_is_still_corruption(db: Path, opened: list[Store]) -> None:
    store = open_at(db, opened)
    seeded = seed(store, 2, forks=0)
    store.redact(Redaction(values=[VALUE]))
    run_id = seeded.holding[0]
    with sqlite3.connect(db) as conn:
        ((run_ref,),) = conn.execute("SELECT id FROM safepoint_runs WHERE run_id = ?", (run_id,))
        ((messages,),) = conn.execute(
            "SELECT messages FROM safepoint_checkpoints WHERE id = ?", (run_ref << 32,)
        )
        edited = bytes(messages).replace(b"value-1", b"value-2", 1)
        assert edited != bytes(messages)
        conn.execute("UPDATE safepoint_checkpoints SET messages = ? WHERE id = ?", (edited, run_ref << 32))
    conn.close()
    report = verify_store(store)
    assert {failure["run_id"] for failure in report.failures} == {run_id}
    assert len(report.redactions) == len(seeded.holding)  # the sanctioned rewrite, still shown


def test_a_request_of_several_kinds_stores_what_one_save_would(db: Path, opened: list[Store]) -> None:
    """Rules and a literal value in one request: each scrubber sees the last one's output typed,
    so marked text stays marked text (not a dict with escaped keys)."""
    raw = open_at(db, opened, scrubber=False)
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    raw.save(
        Checkpoint(run_id="both", messages=[{"role": "user", "content": f"{jwt} {VALUE}"}], state={"t": jwt})
    )
    done = raw.redact(Redaction(rules=["jwt"], values=[VALUE]))
    assert done.counts == {"jwt": 2, "secret:value-1": 1}
    cp = raw.load("both")
    assert cp.messages[0]["content"] == f"[REDACTED:jwt] {MARK}"
    assert cp.state["t"] == "[REDACTED:jwt]"
    with sqlite3.connect(db) as conn:
        stored = [
            bytes(cell)
            for row in conn.execute("SELECT header, messages FROM safepoint_checkpoints")
            for cell in row
        ]
    conn.close()
    assert not any(b"$$" in cell for cell in stored)  # no key escaped as a user's "$" key
    assert verify_store(raw).ok


def test_a_redacted_run_stores_what_a_save_with_the_rule_would_have(db: Path, opened: list[Store]) -> None:
    """Headers and bodies byte for byte as a save that knew the rule writes them (the time
    aside): values, markers, chain values, and the scrub report's rules and paths."""
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    known, late = db.with_name("known.db"), db.with_name("late.db")
    for path, options in ((known, {}), (late, {"scrubber": False})):
        store = open_at(path, opened, **options)
        cp = Checkpoint(run_id="n", messages=[{"role": "user", "content": f"{jwt} x"}], labels={"lab": jwt})
        cp.state = {"t": [f"{jwt} y"], "clean": "z"}
        store.save(cp)
        cp = cp.next()
        cp.messages.append({"role": "tool", "content": {"a": jwt}})
        cp.pending_action = {"x": jwt}
        store.save(cp)
    done = opened[-1].redact(Redaction(rules=["jwt"]))
    assert done.counts == {"jwt": 7}  # the label is in both steps' headers
    assert opened[-1].load("n", 1).scrub_report == opened[-2].load("n", 1).scrub_report

    def stored(path: Path) -> list[tuple[bytes, ...]]:
        with sqlite3.connect(path) as conn:
            rows = conn.execute("SELECT header, messages, chains FROM safepoint_checkpoints ORDER BY id")
            out = [
                tuple(re.sub(rb'"created_at":\d+', b"", bytes(cell or b"")) for cell in row) for row in rows
            ]
        conn.close()
        return out

    assert stored(late) == stored(known)
    assert verify_store(opened[-1]).ok


def test_an_async_store_redacts_the_same(db: Path) -> None:
    async def main() -> None:
        store = await safepoint.open_async_store(f"sqlite:///{db}", blob_threshold=THRESHOLD)
        try:
            await store.save(
                Checkpoint(run_id="a", messages=[{"role": "user", "content": "x" * 300 + VALUE}])
            )
            seen: list[tuple[int, int]] = []
            done = await store.redact(Redaction(values=[VALUE]), progress=lambda i, n: seen.append((i, n)))
            assert done.counts == {"secret:value-1": 1}
            assert seen == [(1, 1)]
            assert (await store.load("a")).messages[0]["content"] == "x" * 300 + MARK
            assert [record.found for record in await store.redactions("a")] == [1]
        finally:
            await store.close()

    asyncio.run(main())
    assert_gone(db)
