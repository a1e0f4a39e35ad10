"""Redaction's pace (issue 37): ``Store.redact`` over 1,000 runs, beside ``Scrubber.scrub``.

Each store holds ``RUNS`` runs of ``STEPS`` steps, two messages of ~500 B a
step (a user message and a reply, seeded words) and a small state; one row
in ten adds a tool output of ~70 KB (a blob); one row in a hundred holds a
leaked value, in its reply or, every other time, in its tool output. The redaction takes that
value out with one registered secret and the default rules (what a user
runs when a key is found in stored runs): its CPU time and wall time over
the whole store, and the bytes of stored values it looked at (headers,
bodies and journal results, as stored before sealing). Beside it, in the
same process, ``Scrubber.scrub`` with the same secret and rules over the
same values (every body and header field decoded from the store, as a save
would be given them): the floor of looking at those bytes at all. The
target: the redaction within 2x of the scrubber's CPU per byte.

Every configuration: SQLite (blobs in files), SQLite encrypted, SQLite with
blobs in the database, SQLite with blobs in S3 (moto's server, the tests'
``blob_server``), and on PostgreSQL plain and encrypted (scratch schemas,
dropped after).
"""

from __future__ import annotations

import base64
import os
import random
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scratch_stores import Made, scratch_stores

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from blob_server import CREDENTIALS, REGION, start_s3_server
from safepoint import Checkpoint, Redaction, Secrets, open_store
from safepoint.model import VALUE_FIELDS
from safepoint.scrub import Scrubber

RUNS = 1_000
STEPS = 5
EVERY = 100  # one row in EVERY holds the value
REPS = 3  # the dry run and the scrubber are timed this many times; the least CPU counts
VALUE = 'Leaked-Token-7Q"9x/Quartz'
KEYS = f"index:{base64.b64encode(bytes(range(32))).decode()} k1:{base64.b64encode(b'k' * 32).decode()}"
_WORDS = ("agent", "tool", "result", "plan", "weather", "invoice", "summary", "draft", "check", "ticket")


@dataclass(frozen=True, slots=True)
class RedactResult:
    store: str
    rows: int
    rows_found: int
    bytes_scanned: int
    found: int
    runs_changed: int
    scan_cpu_s: float  # a dry run: every row read and looked at, nothing written (best of REPS)
    cpu_s: float  # the redaction itself (once: it changes the store)
    wall_s: float
    scrub_cpu_s: float  # Scrubber.scrub over the same values, same process (best of REPS)

    @property
    def ratio(self) -> float:
        return self.scan_cpu_s / self.scrub_cpu_s if self.scrub_cpu_s else float("inf")

    @property
    def mb_per_s(self) -> float:
        return self.bytes_scanned / self.scan_cpu_s / 1e6 if self.scan_cpu_s else 0.0


@contextmanager
def stores(pg_url: str | None) -> Iterator[Made]:
    """(name, url, options) of each configuration; PostgreSQL in scratch schemas, dropped after."""
    s3 = start_s3_server()
    try:
        for name, value in {**CREDENTIALS, "region": REGION}.items():  # boto3 reads these
            env = {"aws_access_key_id": "AWS_ACCESS_KEY_ID", "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY"}
            os.environ.setdefault(env.get(name, "AWS_DEFAULT_REGION"), value)
        import boto3  # noqa: PLC0415  (the s3 extra)

        boto3.session.Session().client(
            "s3", endpoint_url=s3.endpoint_url, region_name=REGION, **CREDENTIALS
        ).create_bucket(Bucket="redact-bench")
        more: Made = [
            ("SQLite, blobs in the database", "sqlite:///{tmp}/inline.db", {"blobs": "database"}),
            (
                "SQLite, blobs in S3",
                "sqlite:///{tmp}/s3.db",
                {"blobs": f"s3://redact-bench/store?endpoint_url={s3.endpoint_url}"},
            ),
        ]
        with scratch_stores("redact", pg_url, KEYS, more) as made:
            yield made
    finally:
        s3.stop()


def _text(rng: random.Random, size: int) -> str:
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


def fill(store: Any, seed: int = 37) -> tuple[int, int]:
    """RUNS runs of STEPS steps; one row in EVERY holds VALUE. (rows, rows holding it)."""
    rng = random.Random(seed)
    rows = found = 0
    for run in range(RUNS):
        cp = Checkpoint(run_id=f"bench-{run:05d}", labels={"team": "bench"})
        for step in range(STEPS):
            if step:
                cp = cp.next()
            leak = rows % EVERY == EVERY - 1
            in_blob = leak and (rows // EVERY) % 2 == 1  # every other leak is in a tool output
            reply = _text(rng, 480) + (f" the key is {VALUE}" if leak and not in_blob else "")
            cp.messages.append({"role": "user", "content": _text(rng, 480)})
            cp.messages.append({"role": "assistant", "content": reply})
            if rows % 10 == 0 or in_blob:  # a tool output over the blob threshold
                output = _text(rng, 70_000) + (f" the key is {VALUE}" if in_blob else "")
                cp.messages.append({"role": "tool", "content": output})
            cp.state = {"turn": step, "topic": rng.choice(_WORDS)}
            cp.counters["tokens_in"] = cp.counters.get("tokens_in", 0) + 120
            store.save(cp)
            rows += 1
            found += leak
    return rows, found


def stored_values(store: Any) -> list[tuple[Any, str]]:
    """Every message and header value field as a save would be given them (decoded), with its root."""
    values: list[tuple[Any, str]] = []
    for run in range(RUNS):
        run_id = f"bench-{run:05d}"
        for step in range(STEPS):  # every row's header, as the redaction reads every row
            cp = store.load(run_id, step, migrate=False)  # blobs inlined: their bytes are scanned too
            values += [(getattr(cp, name), name) for name in VALUE_FIELDS if getattr(cp, name) is not None]
        values += [(message, f"messages[{index}]") for index, message in enumerate(cp.messages)]
    return values


def run(pg_url: str | None) -> list[RedactResult]:
    results = []
    with stores(pg_url) as made:
        for name, url, options in made:
            store = open_store(url, **options)
            rows, found_rows = fill(store)
            values = stored_values(store)
            store.close()
            secrets = Secrets().add("LEAKED", VALUE)
            scans = []
            for _ in range(REPS):
                store = open_store(url, **options)  # a fresh process's store: nothing remembered
                cpu = time.process_time()
                store.redact(Redaction(secrets=secrets, rules=True), dry_run=True)
                scans.append(time.process_time() - cpu)
                store.close()
            store = open_store(url, **options)
            cpu, wall = time.process_time(), time.perf_counter()
            done = store.redact(Redaction(secrets=secrets, rules=True))
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            store.close()
            scrubs = []
            for _ in range(REPS):
                scrubber = Scrubber(secrets=Secrets().add("LEAKED", VALUE))  # fresh: no memo warmed
                scrub_cpu = time.process_time()
                for value, root in values:
                    scrubber.scrub(value, root)
                scrubs.append(time.process_time() - scrub_cpu)
            results.append(
                RedactResult(
                    store=name,
                    rows=rows,
                    rows_found=found_rows,
                    bytes_scanned=done.bytes_scanned,
                    found=sum(done.counts.values()),
                    runs_changed=len([r for r in done.runs if r.found]),
                    scan_cpu_s=min(scans),
                    cpu_s=cpu,
                    wall_s=wall,
                    scrub_cpu_s=min(scrubs),
                )
            )
    return results
