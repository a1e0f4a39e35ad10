"""Before and after a refactor: the same probes on two trees of safepoint, interleaved, in one run.

    .venv/bin/python bench/sections/house.py                  # house2-start against the working tree
    .venv/bin/python bench/sections/house.py --before REV --runs 3

A refactor must not move behaviour, and must not make the hot paths dearer.
This section checks out ``--before`` (default: the tag ``house2-start``,
where the house's second pass began) into a temporary worktree and runs the
same probe process against it and against this tree, alternating
(before, after, before, after …) so that the machine's drift falls on both.
Each probe reports, for a default SQLite store:

* ``save_ir``: instructions per save (callgrind; a run of ``WARMUP`` saves
  subtracted from one of ``WARMUP + SAVES``), the figure that does not move
  with the machine's load; ``save_cpu_us``/``load_cpu_us``: native CPU per
  save and per load of the latest checkpoint (process time, median of the
  run's batches);
* ``claimed_queries``: the named queries (``QueryLog``) a ``Worker`` makes
  for one claimed one-step run driven by the documented handler, and
  ``claimed_ir``/``claimed_cpu_us``: instructions (``WARMUP_CLAIMS`` runs
  subtracted from ``WARMUP_CLAIMS + CLAIMS``, the same runs queued in both)
  and native CPU per such run.

A figure is worse when the median of the after-runs lies outside the range
of the before-runs by more than 5 %.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WARMUP = 50
SAVES = 200
WARMUP_CLAIMS = 10
CLAIMS = 40
TOLERANCE = 0.05

_PROBE = r"""
import json, os, sys, tempfile, time
import safepoint
from safepoint import Checkpoint
from safepoint.testing.conformance.query_log import QueryLog

def agent_step(cp, step):
    cp.step = step
    cp.messages.append({"role": "user", "content": f"question {step} " + "x" * 200})
    cp.messages.append({"role": "assistant", "content": f"answer {step} " + "y" * 400})
    cp.counters["tokens_in"] = cp.counters.get("tokens_in", 0) + 120
    cp.counters["steps"] = step + 1
    cp.cursors["batch"] = {"done": step}
    return cp

def saves(store, run_id, n):
    cp = Checkpoint(run_id=run_id)
    for step in range(n):
        store.save(agent_step(cp, step))
    return cp

from safepoint import Run, Status
from safepoint.worker import Worker, Job

def handler(job):
    # The documented handler of each tree: job.open_run() where it exists.
    if hasattr(Job, "open_run"):
        run = job.open_run()
    else:
        run = Run.open(job.store, job.run_id, lease=job.lease)
    run.commit()  # one step; the worker's release marks the run done
    return Status.DONE

def queue(store, runs):
    for i in range(runs):
        store.save(Checkpoint(run_id=f"job-{i}", messages=[{"role": "user", "content": "go"}]))
        store.enqueue(f"job-{i}")
    return Worker(store, handler, worker_id="bench", lease=30, poll=0.01)

mode, n = sys.argv[1], int(sys.argv[2])
folder = tempfile.mkdtemp()
store = safepoint.open_store(f"sqlite:///{folder}/s.db")
# callgrind counts the whole process: the caller subtracts two of them, which
# differ only in how many saves (or claimed runs) they make.
if mode == "ir":
    saves(store, "r", n)
    print(json.dumps({}))
    sys.exit(0)
if mode == "irclaim":
    queue(store, int(sys.argv[3])).run(max_runs=n)
    print(json.dumps({}))
    sys.exit(0)
out = {}
batches = []
cp = Checkpoint(run_id="r")
for step in range(n):
    start = time.process_time()
    store.save(agent_step(cp, step))
    batches.append(time.process_time() - start)
out["save_cpu_us"] = sorted(batches)[len(batches) // 2] * 1e6
loads = []
for _ in range(n):
    start = time.process_time()
    store.load("r")
    loads.append(time.process_time() - start)
out["load_cpu_us"] = sorted(loads)[len(loads) // 2] * 1e6

runs = 50
worker = queue(store, runs + 1)
log = QueryLog(store)
worker.run(max_runs=1)
out["claimed_queries"] = [query.name for query in log.take()]
start = time.process_time()
worker.run(max_runs=runs)
out["claimed_cpu_us"] = (time.process_time() - start) / runs * 1e6
print(json.dumps(out))
"""


def probe(src: Path, mode: str, n: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, "-c", _PROBE, mode, str(n)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"probe failed on {src}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def instructions(src: Path, mode: str, warmup: int, counted: int, total: int) -> float:
    """Instructions per unit of work: two callgrind processes doing ``warmup`` and
    ``warmup + counted`` units (``total`` set up in both), their difference over ``counted``."""
    counts = []
    for n in (warmup, warmup + counted):
        env = {**os.environ, "PYTHONPATH": str(src)}
        command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
        done = subprocess.run(
            [*command, sys.executable, "-c", _PROBE, mode, str(n), str(total)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        line = next((x for x in done.stderr.splitlines() if "Collected :" in x), None)
        if done.returncode != 0 or line is None:
            raise RuntimeError(f"callgrind probe failed on {src}:\n{done.stderr[-3000:]}")
        counts.append(int(line.rsplit(":", 1)[1]))
    return (counts[1] - counts[0]) / counted


def compare(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for key in ("save_ir", "save_cpu_us", "load_cpu_us", "claimed_ir", "claimed_cpu_us"):
        low = min(r[key] for r in before)
        high = max(r[key] for r in before)
        median = statistics.median(r[key] for r in after)
        worse = median > high * (1 + TOLERANCE)
        better = median < low * (1 - TOLERANCE)
        rows.append(
            {"figure": key, "before": (low, high), "after": median, "verdict": _verdict(worse, better)}
        )
    return rows


def markdown(results: dict[str, list[dict[str, Any]]], before: str) -> str:
    """The comparison as the Markdown table docs/benchmarks.md shows."""
    names = {
        "save_ir": "instructions per save (callgrind)",
        "save_cpu_us": "CPU per save, µs",
        "load_cpu_us": "CPU per load of the latest checkpoint, µs",
        "claimed_ir": "instructions per claimed one-step run (callgrind)",
        "claimed_cpu_us": "CPU per claimed one-step run (worker + handler), µs",
    }
    lines = [
        f"| figure | before ({before}): range of {len(results['before'])} | after: median of "
        f"{len(results['after'])} | after / before median | verdict |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in compare(results["before"], results["after"]):
        low, high = row["before"]
        middle = statistics.median(r[row["figure"]] for r in results["before"])
        ratio = row["after"] / middle if middle else float("nan")
        lines.append(
            f"| {names[row['figure']]} | {low:,.0f} to {high:,.0f} | {row['after']:,.0f} | {ratio:.2f} |"
            f" {row['verdict']} |"
        )
    queries = {name: ", ".join(results[name][0]["claimed_queries"]) for name in ("before", "after")}
    lines += [
        "",
        f"Named queries of a claimed one-step run (SQLite), before: {queries['before']}"
        f" ({len(results['before'][0]['claimed_queries'])}); after: {queries['after']}"
        f" ({len(results['after'][0]['claimed_queries'])}).",
    ]
    return "\n".join(lines)


def _verdict(worse: bool, better: bool) -> str:
    return "worse" if worse else "better" if better else "same"


def run(before: str = "house2-start", runs: int = 3, ir: bool = True) -> str:
    """Probe ``before`` and this tree ``runs`` times each, interleaved; the Markdown report.
    Each probe's figures go to stderr as they come."""
    tmp = Path(tempfile.mkdtemp(prefix="safepoint-house-"))
    tree = tmp / "before"
    try:
        add = ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), before]
        subprocess.run(add, check=True)
        trees = {"before": tree / "src", "after": ROOT / "src"}
        results: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        for _ in range(runs):
            for name in ("before", "after"):
                found = probe(trees[name], "cpu", 400)
                found["save_ir"] = instructions(trees[name], "ir", WARMUP, SAVES, 0) if ir else 0.0
                claims = WARMUP_CLAIMS + CLAIMS
                found["claimed_ir"] = (
                    instructions(trees[name], "irclaim", WARMUP_CLAIMS, CLAIMS, claims) if ir else 0.0
                )
                results[name].append(found)
                print(name, json.dumps(found), file=sys.stderr, flush=True)
        return markdown(results, before)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--before", default="house2-start")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-ir", action="store_true", help="skip the callgrind counts (minutes)")
    args = parser.parse_args(argv)
    print(run(args.before, args.runs, ir=not args.no_ir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
