"""How fast the rule table scans agent traffic: MB/s for the secret rules, and with every PII kind.

    .venv/bin/python bench/scrub_rules_speed.py [--mb 5] [--seed 0] [--repeat 3]

Scans ``safepoint.testing.traffic.mixed_traffic`` chunk by chunk with
``RuleScanner.redact`` (the way the scrubber calls it) and prints the best of
``--repeat`` runs. Not a test: speed is measured here, never asserted.
"""

from __future__ import annotations

import argparse
import time

from safepoint.scrub.rules import PII_KINDS, RuleScanner, default_scanner
from safepoint.testing.traffic import KINDS, mixed_traffic, traffic_by_kind


def best_mb_per_s(scanner: RuleScanner, chunks: list[str], repeat: int) -> tuple[float, int]:
    size = sum(len(chunk.encode()) for chunk in chunks)
    best = float("inf")
    hits = 0
    for _ in range(repeat):
        start = time.perf_counter()
        hits = sum(len(scanner.redact(chunk)[1]) for chunk in chunks)
        best = min(best, time.perf_counter() - start)
    return size / 1e6 / best, hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=5.0, help="traffic to scan, in MB")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    total = int(args.mb * 1_000_000)
    chunks = mixed_traffic(total, args.seed)
    print(f"mixed_traffic({total:_}, seed={args.seed}): {len(chunks)} chunks")
    for label, scanner in (
        ("secret rules", default_scanner()),
        ("secret + all PII", default_scanner(PII_KINDS)),
    ):
        speed, hits = best_mb_per_s(scanner, chunks, args.repeat)
        print(f"  {label:18} {speed:6.1f} MB/s   ({hits} findings)")
    by_kind = traffic_by_kind(total, args.seed)
    print("secret rules by kind:")
    for kind in KINDS:
        speed, hits = best_mb_per_s(default_scanner(), by_kind[kind], args.repeat)
        print(f"  {kind:18} {speed:6.1f} MB/s   ({hits} findings)")


if __name__ == "__main__":
    main()
