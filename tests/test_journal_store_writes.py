"""A journal write that stored its entry reads nothing back: what it returns is what a read
gives back (result in stored form, key order, usage, redactions, step, writer, times), on
every backend, plain and encrypted; a record whose intent was written at an earlier step
keeps that step (sealed for it); a record that finds a result stored first writes no blob.
"""

from __future__ import annotations

import base64
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from journal_stores import VARIANTS, Backend, backends, started
from safepoint import Keyring, Secrets
from safepoint.records import CallUsage, Recorded

TOKEN = "sk-proj-Zq81mXc0PfLw2RkT9vYbH4nJ6tGd3sQe"  # matched by the scrubber's token rules
SECRET = "zq-Registered-Secret-4411"
THRESHOLD = 64  # values over this many bytes go to the blob target
RESULTS: tuple[Any, ...] = (
    {"z": 1, "a": [1.5, None, True], "m": {"y": "x", "b": "é💥"}},  # key order: as a read sorts it
    {"key": SECRET, "said": f"the key is {SECRET}", "token": TOKEN},  # a reference, markers
    {"$secret": "API_KEY", "$$": {"$k": ["$v"]}},  # input shaped like references: plain data
    {"long": "long " * 40, "data": bytes(range(256))},  # to the blob target
    "[SECRET:API_KEY] text shaped like a marker",
    [],
    0,
)


PARAMS = [(variant, False) for variant in VARIANTS] + [("sqlite", True), ("postgres", True)]


@pytest.fixture(params=PARAMS, ids=[f"{variant}{'-encrypted' * sealed}" for variant, sealed in PARAMS])
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Backend, Any]]:
    variant, encrypted = request.param
    for backend in backends(variant, tmp_path):
        options: dict[str, Any] = {"blob_threshold": THRESHOLD, "secrets": Secrets({"API_KEY": SECRET})}
        if encrypted:
            keys = " ".join(f"{name}:{base64.b64encode(os.urandom(32)).decode()}" for name in ("index", "k1"))
            options["encryption"] = Keyring.from_text(keys)
        yield backend, backend.open(**options)


def _as_read(entry: Recorded) -> Recorded:
    return dataclasses.replace(entry, written=False)


def _same(written: Recorded, read: Recorded | None) -> None:
    assert read is not None
    assert _as_read(written) == read
    assert repr(written.result) == repr(read.result)  # dict key order and types too


def test_a_write_returns_what_a_read_gives_back(opened: tuple[Backend, Any]) -> None:
    _, store = opened
    started(store, "run", 2)
    usage = CallUsage(tokens_in=12, tokens_out=7, spend=0.01)
    for n, result in enumerate(RESULTS):
        done = store.record_call("run", f"r{n}", result, request={"n": n}, usage=usage)
        assert (done.written, done.done) == (True, True)
        _same(done, store.recorded_call("run", f"r{n}", request={"n": n}))
        intent = store.call_intent("run", f"i{n}", request={"n": n})
        assert (intent.written, intent.done) == (True, False)
        _same(intent, store.recorded_call("run", f"i{n}", request={"n": n}))
        completed = store.record_call("run", f"i{n}", result, request={"n": n + 1})  # another request
        assert (completed.written, completed.same_request) == (True, False)
        assert completed.created_at == intent.created_at  # the intent's, kept
        _same(completed, store.recorded_call("run", f"i{n}", request={"n": n + 1}))
    assert store.record_call("run", "r1", "later").redacted == 1  # the first result's, the token
    lease = store.hold_run("run", "worker-a", lease=60)
    held = store.call_intent("run", "held", lease=lease)
    assert (held.writer, held.epoch, held.writer_live) == ("worker-a", lease.epoch, True)
    _same(held, store.recorded_call("run", "held"))
    done = store.record_call("run", "held", {"ok": True}, lease=lease)
    assert (done.writer, done.writer_live) == ("worker-a", True)
    _same(done, store.recorded_call("run", "held"))


def test_a_record_keeps_the_step_of_its_intent(opened: tuple[Backend, Any]) -> None:
    _, store = opened
    cp = started(store, "run", 2)
    store.call_intent("run", "pay", request={"amount": 5})
    cp = cp.next()
    store.save(cp)  # the checkpoint that covers the intent: the head is 2 now
    done = store.record_call("run", "pay", {"paid": 5, "note": "x" * 100}, request={"amount": 5})
    assert (done.step, done.written, done.result) == (2, True, {"paid": 5, "note": "x" * 100})
    found = store.recorded_call("run", "pay")  # opens for step 2 on an encrypted store
    assert found is not None
    assert (found.step, found.result) == (2, done.result)
    assert [e.key for e in store.recorded_calls("run", step=2)] == ["pay"]
    assert store.verify_calls("run").damaged == []


def test_a_second_writer_stores_no_blob(tmp_path: Path) -> None:
    for backend in backends("sqlite", tmp_path):
        store = backend.open(blob_threshold=THRESHOLD, blobs="database")
        started(store, "run")
        first = store.record_call("run", "k", {"text": "first " * 40})
        second = store.record_call("run", "k", {"text": "second " * 40})
        assert (second.written, second.result) == (False, first.result)
        assert len(backend.raw("SELECT digest FROM safepoint_blobs")) == 1
