"""A redaction's audit records survive ``encrypt``: on a plain store a record's check value is
a plain digest; once the store is encrypted it is checked keyed under the index key (like the
checkpoint digests), so the conversion keys it too — else every record written before it reads
as edited (``intact`` False) and ``verify`` reports a sanctioned rewrite as tampering. Found by
the model-based test's ``redact`` operation (redact, encrypt, look at the records).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

import safepoint
from safepoint import Checkpoint, Keyring, Redaction, Store
from safepoint.store.admin import verify_store
from safepoint.store.keys import encrypt_store, rekey_store

VALUE = "PLANTED-x7Q-cobalt-4412"
MARK = "[REDACTED:value-1]"


def keyring(*keys: int) -> Keyring:
    index = base64.b64encode(bytes([3]) * 32).decode()
    written = " ".join(f"k{key}:{base64.b64encode(bytes([key]) * 32).decode()}" for key in keys)
    return Keyring.from_text(f"index:{index} {written}")


def redact_encrypt_and_check(open_one: Callable[..., Store]) -> None:
    store = open_one()
    for run_id in ("run-a", "run/é $b"):
        store.save(Checkpoint(run_id=run_id, step=0, messages=[{"role": "user", "content": f"x {VALUE}"}]))
        store.save(store.load(run_id).next().evolve(state={"k": f"{VALUE}\n\x00"}))
    assert len(store.redact(Redaction(values=[VALUE])).runs) == 2
    assert [r.intact for r in store.redactions("run-a")] == [True]
    assert encrypt_store(store, keyring(1)).ok
    store.close()
    store = open_one(encryption=keyring(1))
    for run_id in ("run-a", "run/é $b"):
        (record,) = store.redactions(run_id)
        assert record.intact, run_id
        assert record.found == 2
        assert store.load(run_id).state == {"k": f"{MARK}\n\x00"}
    assert verify_store(store).ok
    store.close()
    store = open_one(encryption=keyring(1, 2))  # a new writing key: the index key and records stay
    rekey_store(store)
    assert [r.intact for r in store.redactions("run-a")] == [True]
    store.close()


def test_sqlite_records_stay_intact_through_encrypt(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    redact_encrypt_and_check(lambda **options: safepoint.open_store(url, **options))


def test_postgres_records_stay_intact_through_encrypt(postgres_dsn: str, pg_schema: str) -> None:
    redact_encrypt_and_check(
        lambda **options: safepoint.open_store(
            postgres_dsn, schema=pg_schema, min_size=1, max_size=2, **options
        )
    )


def test_two_requests_of_one_shape_keep_records_of_their_own_on_an_encrypted_store(tmp_path: Path) -> None:
    """Two deletion requests of one literal value each: on an encrypted store the request's id is
    keyed by its values, so each leaves its own record and a rerun of either completes its own; on
    a plain store the id is the request's shape alone (no value can be tested against it), so the
    two share one record."""
    other = "PLANTED-second-value-9931"
    for encrypted in (True, False):
        options = {"encryption": keyring(1)} if encrypted else {}
        store = safepoint.open_store(f"sqlite:///{tmp_path / f'runs-{encrypted}.db'}", **options)
        store.save(
            Checkpoint(run_id="run-a", step=0, messages=[{"role": "user", "content": f"{VALUE} {other}"}])
        )
        first = store.redact(Redaction(values=[VALUE]))
        second = store.redact(Redaction(values=[other]))
        assert store.redact(Redaction(values=[other])).runs == []  # a rerun: nothing left, nothing added
        records = store.redactions("run-a")
        if encrypted:
            assert first.redaction_id != second.redaction_id
            assert sorted(r.redaction_id for r in records) == sorted(
                [first.redaction_id, second.redaction_id]
            )
            assert all(r.found == 1 and r.intact for r in records)
        else:
            assert first.redaction_id == second.redaction_id
            assert [(r.found, r.intact) for r in records] == [(2, True)]
        assert store.load("run-a").messages[0]["content"] == f"{MARK} {MARK}"
        store.close()
