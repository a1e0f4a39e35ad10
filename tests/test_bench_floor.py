"""The floor benchmark section (bench/sections/floor.py, issue 34) keeps working: a scaled run
without valgrind renders its report, and its callgrind parsing sums a dump by object file."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

from report import floor as floor_report  # noqa: E402
from report.fmt import TIMES  # noqa: E402
from sections import floor, floor_probe  # noqa: E402

# A dump as callgrind writes it: compressed names (defined once, in ob= or cob= lines), relative
# positions, and a call's inclusive cost on the line after its calls= line (not self cost).
DUMP = """# callgrind format
version: 1
desc: Trigger: Client Request: save@main
positions: line
events: Ir
summary: 1111

ob=(1) /usr/lib/x86_64-linux-gnu/libcrypto.so.3
fl=(1) sha.c
fn=(1) sha256_block
10 600
+2 100

ob=(2) /usr/lib/libpython3.11.so
fl=(2) ceval.c
fn=(2) eval
5 300
cob=(1)
cfi=(1)
cfn=(1)
calls=1 10
+1 700
* 11
cob=(3) /usr/lib/libsqlite3.so
cfn=(3) step
calls=2 0
-3 90

ob=(3)
fl=(3) sqlite3.c
fn=(3) step
0 100
totals: 1111
"""


def test_callgrind_dump_summed_by_object_file() -> None:
    names: dict[str, str] = {}
    costs = floor.by_object(DUMP, names)
    assert costs == {
        "/usr/lib/x86_64-linux-gnu/libcrypto.so.3": 700,
        "/usr/lib/libpython3.11.so": 311,
        "/usr/lib/libsqlite3.so": 100,
    }
    with pytest.raises(RuntimeError, match="totals"):
        floor.by_object(DUMP.replace("totals: 1111", "totals: 1112"), {})


def test_client_requests_are_no_ops_outside_valgrind() -> None:
    if platform.machine() not in ("x86_64", "AMD64"):
        return  # the probe's machine code is x86-64's; elsewhere the section builds the C shim
    callgrind = floor_probe.Callgrind()
    callgrind.start()
    callgrind.toggle()
    callgrind.toggle()
    callgrind.dump("nothing")
    callgrind.stop()


def test_scaled_run_reports_every_target(tmp_path: Path) -> None:
    result = floor.run(
        tmp_path, cpu_reps=1, thread_reps=1, scale=0.02, instructions=False, log=lambda _: None
    )
    text = floor_report.render(result, command="bench/run.py --section floor")
    assert text.startswith("## Close to the floor (issue 34)")
    assert "Scaled run" in text
    targets = {t.measure: t for t in floor_report.targets(result)}
    assert targets["In-place save, instructions / floor (c), `scrubber=False`"].measured == "not measured"
    assert targets["In-place save, native CPU / floor (c2)"].measured.endswith(TIMES)
    # A save of a run with no calls, the journal holding another run's: no journal query.
    assert result.queries
    assert all(names for names in result.queries)
    assert targets["Journal present, no calls on the run: journal queries per save"].ok
