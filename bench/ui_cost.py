"""The inspector's cost page (``/cost``) over a store of many runs: how long one page takes.

Fills a fresh SQLite store (plain, and with ``--encrypted`` an encrypted one
too) with ``--runs`` runs of one checkpoint each, counters on them, spread
over 30 days, then asks the served app for ``/cost`` (the whole store, by
day), ``/cost?by=month`` and a label filter ``--repeat`` times each through
Starlette's test client (the page rendered, the guard in front), and prints
the median and the slowest wall time. Wall time on a shared machine: the
figure varies with its load.

With ``--postgres DSN`` the same over a fresh schema on that server (dropped
afterwards).

    .venv/bin/python bench/ui_cost.py [--runs 10000] [--repeat 5] [--encrypted] [--postgres DSN]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql
from starlette.testclient import TestClient

import safepoint
from safepoint import Checkpoint, Keyring, records
from safepoint.ui import create_app

DAY_MICROS = 86_400 * 1_000_000
KEYS = "index:{}\nk1:{}\n"


def fill(url: str, runs: int, **options: object) -> None:
    start = records.now_micros() - 30 * DAY_MICROS
    real = records.now_micros
    with safepoint.open_store(url, **options) as store:  # type: ignore[arg-type]
        for n in range(runs):
            moment = start + (n * 30 * DAY_MICROS) // runs
            records.now_micros = lambda moment=moment: moment  # type: ignore[assignment]
            cp = Checkpoint(run_id=f"run-{n:06d}", labels={"team": f"t{n % 7}"})
            cp.counters = {"tokens_in": 1000 + n, "tokens_out": 960.0, "spend": 0.0125 * (n % 13), "steps": 4}
            store.save(cp)
    records.now_micros = real  # type: ignore[assignment]


def timed(web: TestClient, path: str, repeat: int) -> tuple[float, float]:
    seconds = []
    for _ in range(repeat):
        began = time.perf_counter()
        answer = web.get(path)
        seconds.append(time.perf_counter() - began)
        assert answer.status_code == 200, answer.status_code
    return statistics.median(seconds), max(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--encrypted", action="store_true")
    parser.add_argument("--postgres", metavar="DSN", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        kinds: list[tuple[str, dict[str, object]]] = [("sqlite", {})]
        if args.encrypted:
            import base64  # noqa: PLC0415
            import os  # noqa: PLC0415

            key_path = Path(folder) / "keys.txt"
            secret = [base64.urlsafe_b64encode(os.urandom(32)).decode() for _ in range(2)]
            key_path.write_text(KEYS.format(*secret))
            key_path.chmod(0o600)
            kinds.append(("sqlite encrypted", {"encryption": Keyring.from_file(key_path)}))
        schema = f"sp_bench_cost_{uuid.uuid4().hex[:12]}"
        if args.postgres:
            kinds = [(name.replace("sqlite", "postgresql"), options) for name, options in kinds]
        for name, options in kinds:
            url = f"sqlite:///{folder}/{name.replace(' ', '_')}.db"
            if args.postgres:
                url = f"{args.postgres}{'&' if '?' in args.postgres else '?'}schema={schema}{len(options)}"
            began = time.perf_counter()
            fill(url, args.runs, **options)
            print(f"{name}: {args.runs:,} runs saved in {time.perf_counter() - began:.1f} s", file=sys.stderr)
            with safepoint.open_store(url, read_only=True, **options) as store:  # type: ignore[arg-type]
                web = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
                for path in ("/cost", "/cost?by=month", "/cost?label=team%3Dt3"):
                    median, slowest = timed(web, path, args.repeat)
                    print(f"{name} {path}: median {median * 1000:.0f} ms, slowest {slowest * 1000:.0f} ms")
            if args.postgres:
                with psycopg.connect(args.postgres, autocommit=True) as conn:
                    drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE")
                    conn.execute(drop.format(sql.Identifier(f"{schema}{len(options)}")))


if __name__ == "__main__":
    main()
