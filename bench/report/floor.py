"""Close to the floor in docs/benchmarks.md (issue 34): ``sections.floor``'s figures against their floors."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from datetime import UTC, datetime

from sections.floor import CPU_REPS, CRYPTO, IR_GROUPS, THREAD_STEPS, THREADS, FloorResult
from sections.floor_lanes import MESSAGE_CHARS, TOOL_CHARS
from sections.floor_probe import AT_10, AT_1000, LOADS, MAIN

from report import templating
from report.fmt import TIMES, Target, table, x

ISSUE = "#34"
SECTION = "close-to-the-floor-issue-34"
FRESH = {
    "fresh_list": ("a fresh `Checkpoint` each step, `messages=list(conversation)`", "save"),
    "fresh_deep": ("a fresh `Checkpoint` each step, `copy.deepcopy` of the messages and fields", "save"),
    "fresh_list_tools": (
        f"the same, list copy, a {TOOL_CHARS // 1000} KB tool output every 10th step",
        "save_tools",
    ),
    "fresh_deep_tools": (
        f"the same, deep copy, a {TOOL_CHARS // 1000} KB tool output every 10th step",
        "save_tools",
    ),
}
JOURNAL_QUERY = "call"  # the journal's named queries: call_intent, call_done, calls_of_run, ...


class Figures:
    """Lookups over one result: instructions and CPU per call, by lane and window."""

    def __init__(self, r: FloorResult) -> None:
        self.r = r
        self.counted = isinstance(r.ir, dict)

    def label(self, lane: str, window: str) -> str:
        """``lane@window``; "load10"/"load1000" name a lane's first and last load window."""
        if not window.startswith("load"):
            return f"{lane}@{window}"
        loads = sorted(
            (
                k
                for k in [*self.r.cpu, *(self.r.ir if isinstance(self.r.ir, dict) else {})]
                if k.startswith(f"{lane}@load")
            ),
            key=lambda k: int(k.rsplit("load", 1)[1]),
        )
        return loads[0] if window == "load10" else loads[-1]

    def ir(self, lane: str, window: str = "main", *, crypto: bool = True) -> float | None:
        if not isinstance(self.r.ir, dict):
            return None
        label = self.label(lane, window)
        if label not in self.r.ir:
            return None
        return self.r.instructions(label, without=None if crypto else CRYPTO)

    def cpu(self, lane: str, window: str = "main") -> float | None:
        label = self.label(lane, window)
        return self.r.cpu_median(label) if label in self.r.cpu else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _m(n: float | None) -> str:
    return "—" if n is None else f"{n / 1e6:.3f} M"


def _us(s: float | None) -> str:
    return "—" if s is None else f"{s * 1e6:,.0f} µs"


def _x(ratio: float | None) -> str:
    return "—" if ratio is None else x(ratio)


def _target(
    measure: str, ratio: float | None, limit: float, shown: str | None = None, *, at_least: bool = False
) -> Target:
    if ratio is None:
        return Target(
            ISSUE, measure, "not measured", f"{'≥' if at_least else '≤'} {limit:g}{TIMES}", False, SECTION
        )
    ok = ratio >= limit if at_least else ratio <= limit
    return Target(
        ISSUE, measure, shown or x(ratio), f"{'≥' if at_least else '≤'} {limit:g}{TIMES}", ok, SECTION
    )


def targets(r: FloorResult) -> list[Target]:
    f = Figures(r)
    floor_c, floor_c2 = f.ir("floor_c"), f.cpu("floor_c2")
    out = [
        _target("In-place save, native CPU / floor (c2)", _ratio(f.cpu("save"), floor_c2), 3),
        _target(
            f"In-place save, instructions / floor (c), scrubber on (stretch: 3{TIMES})",
            _ratio(f.ir("save"), floor_c),
            4,
        ),
        _target(
            "In-place save, instructions / floor (c), `scrubber=False`",
            _ratio(f.ir("save_noscrub"), floor_c),
            2.5,
        ),
    ]
    for lane, (what, base) in FRESH.items():
        at_1000 = _ratio(f.ir(lane, "1000"), f.ir(base, "1000"))
        growth = _ratio(f.ir(lane, "1000"), f.ir(lane, "10"))
        worst = None if at_1000 is None or growth is None else max(at_1000, growth)
        shown = (
            None
            if worst is None
            else f"{x(at_1000 or 0)} of in place at step 1000; step 1000 / 10 {x(growth or 0)}"
        )
        out.append(
            _target(
                f"{what}: instructions / in place at step 1000, and step 1000 / step 10", worst, 1.5, shown
            )
        )
    single = f.cpu("save")
    if r.threads and single:
        rate, bound = r.thread_rate(True), 1 / single
        out.append(
            _target(
                f"{THREADS} threads, group commit on: saves/s / (1 / native CPU per save)",
                rate / bound,
                0.9,
                f"{x(rate / bound)} ({rate:,.0f} / {bound:,.0f} saves/s)",
                at_least=True,
            )
        )
        cost = r.thread_cpu(True) / r.thread_cpu(False)
        out.append(_target(f"{THREADS} threads: CPU per save, group commit on / off", cost, 1.1))
    load, floor_load = f.cpu("save", "load1000"), f.cpu("floor_c", "load1000")
    out.append(
        _target(
            "Load of a 1,000-step run, native CPU / raw floor (SELECT + `orjson.loads`)",
            _ratio(load, floor_load),
            3,
        )
    )
    peak_label = f.label("save", "load1000")
    peak = statistics.median(r.peak[peak_label]) if r.peak.get(peak_label) else None
    out.append(
        _target(
            "Load of a 1,000-step run, peak memory / the messages' bytes",
            _ratio(peak, r.message_bytes.get(peak_label)),
            2,
        )
    )
    for what, window in (("save", "10"), ("save", "1000"), ("load", "load10"), ("load", "load1000")):
        step = window.removeprefix("load")
        ratio = _ratio(f.cpu("save_encrypted", window), f.cpu("save", window))
        out.append(_target(f"Encrypted / plain, native CPU per {what} at step {step}", ratio, 1.15))
    journal = [sum(JOURNAL_QUERY in name for name in q) for q in r.queries]
    out.append(
        Target(
            ISSUE,
            "Journal present, no calls on the run: journal queries per save",
            "not measured" if not journal else f"{max(journal)}",
            "0",
            bool(journal) and max(journal) == 0,
            SECTION,
        )
    )
    return out


def _saves(f: Figures) -> list[list[str]]:
    """The issue's first table: instructions and native CPU per save against the floors."""
    c, c_nc, c2 = f.ir("floor_c"), f.ir("floor_c", crypto=False), f.cpu("floor_c2")
    rows = []
    lanes: list[tuple[str, str, str]] = [
        (
            "floor_c",
            "raw floor (c): `orjson.dumps` + the store's digest + one INSERT, WAL, synchronous=NORMAL",
            "floor_c",
        ),
        ("floor_c2", "raw floor (c2): the same, synchronous=FULL", "floor_c2"),
        ("save", "safepoint, in-place save", "save"),
        ("save_noscrub", "safepoint, in-place save, `scrubber=False`", "save_noscrub"),
        ("save_encrypted", "safepoint, in-place save, encrypted store", "save_encrypted"),
        ("langgraph", "LangGraph `SqliteSaver.put`, same state (four channels)", "langgraph"),
    ]
    for lane, what, cpu_lane in lanes:
        n, n_nc, cpu = f.ir(lane), f.ir(lane, crypto=False), f.cpu(cpu_lane)
        rows.append(
            [what, _m(n), _x(_ratio(n, c)), _m(n_nc), _x(_ratio(n_nc, c_nc)), _us(cpu), _x(_ratio(cpu, c2))]
        )
    return rows


def _agent(f: Figures) -> list[list[str]]:
    c, c_nc, c2 = f.ir("agent_floor_c"), f.ir("agent_floor_c", crypto=False), f.cpu("agent_floor_c2")
    rows = []
    for lane, what in (
        ("agent_floor_c", "raw floor (c); native CPU: (c2)"),
        ("agent_save", "safepoint, in-place save"),
        ("agent_save_noscrub", "safepoint, in-place save, `scrubber=False`"),
    ):
        n, n_nc = f.ir(lane), f.ir(lane, crypto=False)
        cpu = f.cpu("agent_floor_c2" if lane == "agent_floor_c" else lane)
        rows.append(
            [what, _m(n), _x(_ratio(n, c)), _m(n_nc), _x(_ratio(n_nc, c_nc)), _us(cpu), _x(_ratio(cpu, c2))]
        )
    return rows


def _fresh(f: Figures) -> list[list[str]]:
    rows = []
    for lane, what in (
        ("save", "in place"),
        ("save_tools", f"in place, {TOOL_CHARS // 1000} KB tool outputs"),
    ):
        rows.append(
            [
                what,
                _m(f.ir(lane, "10")),
                x(1),
                _m(f.ir(lane, "1000")),
                x(1),
                _x(_ratio(f.ir(lane, "1000"), f.ir(lane, "10"))),
            ]
        )
    for lane, (what, base) in FRESH.items():
        at10, at1000 = f.ir(lane, "10"), f.ir(lane, "1000")
        rows.append(
            [
                what,
                _m(at10),
                _x(_ratio(at10, f.ir(base, "10"))),
                _m(at1000),
                _x(_ratio(at1000, f.ir(base, "1000"))),
                _x(_ratio(at1000, at10)),
            ]
        )
    return rows


def _loads(f: Figures, r: FloorResult) -> list[list[str]]:
    rows = []
    for lane, what in (
        ("floor_c", "raw floor: SELECT the steps' rows + `orjson.loads`"),
        ("save", "safepoint `load` (latest checkpoint), a first load: a store opened afresh"),
        ("save_encrypted", "the same, encrypted store"),
    ):
        label = f.label(lane, "load1000")
        peak = statistics.median(r.peak[label]) if r.peak.get(label) else None
        rows.append(
            [
                what,
                _m(f.ir(lane, "load1000")),
                _m(f.ir(lane, "load1000", crypto=False)),
                _x(_ratio(f.ir(lane, "load1000"), f.ir("floor_c", "load1000"))),
                _x(_ratio(f.ir(lane, "load1000", crypto=False), f.ir("floor_c", "load1000", crypto=False))),
                "—" if f.cpu(lane, "load1000") is None else f"{f.cpu(lane, 'load1000') * 1e3:.2f} ms",  # type: ignore[operator]
                _x(_ratio(f.cpu(lane, "load1000"), f.cpu("floor_c", "load1000"))),
                "—" if peak is None else f"{peak / 2**20:.2f} MiB",
                _x(_ratio(peak, r.message_bytes.get(label))),
            ]
        )
    return rows


def _encryption(f: Figures) -> list[list[str]]:
    rows = []
    for what, window in (
        ("save at step 10", "10"),
        ("save at step 1000", "1000"),
        ("load at step 10", "load10"),
        ("load at step 1000", "load1000"),
    ):
        plain, sealed = f.cpu("save", window), f.cpu("save_encrypted", window)
        rows.append(
            [
                what,
                _us(plain),
                _us(sealed),
                _x(_ratio(sealed, plain)),
                _m(f.ir("save", window)),
                _m(f.ir("save_encrypted", window)),
                _x(_ratio(f.ir("save_encrypted", window), f.ir("save", window))),
            ]
        )
    return rows


def _threads(r: FloorResult, f: Figures) -> list[list[str]]:
    single = f.cpu("save")
    rows = []
    for on in (True, False):
        rate, cpu = r.thread_rate(on), r.thread_cpu(on)
        rows.append(
            [
                f"group commit {'on' if on else 'off'}",
                f"{rate:,.0f}",
                _us(cpu),
                f"{1 / cpu:,.0f}",
                _x(rate * cpu),
                "—" if single is None else _x(rate * single),
                _x(rate / statistics.median(r.raw_rates)),
            ]
        )
    return rows


def render(r: FloorResult, *, command: str) -> str:
    f = Figures(r)
    d = r.described
    fsync = statistics.median(r.fsync_seconds)
    raw = statistics.median(r.raw_rates)
    names = sorted({n for q in r.queries for n in q})
    per_save = statistics.median(len(q) for q in r.queries) if r.queries else 0
    crypto_share: Callable[[str], float | None] = lambda lane: _ratio(  # noqa: E731
        (f.ir(lane) or 0) - (f.ir(lane, crypto=False) or 0), f.ir(lane)
    )
    return templating.render(
        "floor/floor.md.j2",
        command=command,
        r=r,
        d=d,
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        targets=targets(r),
        counted=f.counted,
        table=table,
        saves=_saves(f),
        agent=_agent(f),
        fresh=_fresh(f),
        loads=_loads(f, r),
        encryption=_encryption(f),
        threads=_threads(r, f),
        fsync_ms=fsync * 1e3,
        raw=raw,
        names=names,
        per_save=per_save,
        crypto_floor=crypto_share("floor_c"),
        MESSAGE_CHARS=MESSAGE_CHARS,
        TOOL_CHARS=TOOL_CHARS,
        MAIN=MAIN,
        AT_10=AT_10,
        AT_1000=AT_1000,
        LOADS=LOADS,
        CPU_REPS=CPU_REPS,
        IR_GROUPS=IR_GROUPS,
        THREADS=THREADS,
        THREAD_STEPS=THREAD_STEPS,
        CRYPTO=CRYPTO,
    )
