"""Where an in-place save's instructions go, piece by piece (issue 34), under callgrind.

    valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no \\
        .venv/bin/python bench/floor_pieces.py PIECE [OPTIONS]   # e.g. RunMemory.remember scrubber=False

The floor section's workload (``floor_lanes.issue_steps``) saved in place into a store on a
file of its own (``OPTIONS``: ``name=value`` store options, Python literals). After 99 warm-up
saves, the next 20 are counted (steps 100-119, as the floor section's): whole (``PIECE`` =
``whole``), or with collection switched off inside one piece of the save path (``PIECE`` = one
of ``PIECES``' labels), each in a process of its own, so that whole minus that count is the
piece's inclusive cost; ``only:PIECE`` collects inside that piece alone; ``nothing`` calls a
do-nothing function through the same wrapper once a save: its count minus whole is the
wrapper's own cost (``only:nothing``: the wrapper's share inside its toggles, ~6 K). Per
save: a dump's ``totals:`` over the window's saves.
"""

from __future__ import annotations

import ast
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from sections import floor_lanes as lanes  # noqa: E402
from sections.floor_probe import Callgrind  # noqa: E402

from safepoint.store import delta, prepare, remembered  # noqa: E402
from safepoint.store.methods import checkpoints  # noqa: E402
from safepoint.store.ops import saving  # noqa: E402

WARM, WINDOW = 99, 20
# FLOOR_PIECES_PATTERN=list|deep: a fresh ``Checkpoint`` each step instead (floor_lanes.StoreLane's
# patterns); FLOOR_PIECES_WARM=995 FLOOR_PIECES_WINDOW=5: "at step 1000", as the floor section's.
PATTERN = os.environ.get("FLOOR_PIECES_PATTERN", "in place")
WARM = int(os.environ.get("FLOOR_PIECES_WARM", WARM))
WINDOW = int(os.environ.get("FLOOR_PIECES_WINDOW", WINDOW))


def _nothing() -> None:
    pass


# (label, owner, attribute): the save path's pieces, each patched on the object it is looked up on.
PIECES: list[tuple[str, Any, str]] = [
    ("nothing", sys.modules[__name__], "_nothing"),
    ("RunMemory.remember", remembered.RunMemory, "remember"),
    ("RunMemory.recall", remembered.RunMemory, "recall"),
    ("finish_save", checkpoints, "finish_save"),
    ("prepare_save", checkpoints, "_PREPARE_VALIDATED"),
    ("plan", prepare.PreparedSave, "plan"),
    ("saving.save", saving, "save"),
    ("checkpoint_info", checkpoints.records, "checkpoint_info"),
    ("freeze", delta, "freeze"),
    ("from_micros", delta, "from_micros"),
    ("StoredView", delta, "StoredView"),
    ("validate_fields", prepare, "validate_fields"),
    ("PreparedSave", prepare, "PreparedSave"),
    ("_prepare_fields", prepare.PreparedSave, "_prepare_fields"),
    ("plan_messages", prepare, "plan_messages"),
    ("extend_chain", delta.codec, "extend_chain"),
    ("_guess", saving, "_guess"),
    ("_save_row", saving, "_save_row"),
    ("checkpoint_row", saving, "checkpoint_row"),
    ("MessagePlan.ranges", delta.MessagePlan, "ranges"),
    ("MessagePlan.carriers", delta.MessagePlan, "carriers"),
    ("is_short_plain_json", prepare, "is_short_plain_json"),
    ("orjson.dumps", prepare, "dumps"),
    ("MessagePlan", delta, "MessagePlan"),
    ("ranges_for_prefix", delta.StoredView, "ranges_for_prefix"),
    ("carriers_for_prefix", delta.StoredView, "carriers_for_prefix"),
    ("BlobSink", prepare, "BlobSink"),
    ("StoredFields.of", prepare.StoredFields, "of"),
    ("guarded", prepare, "guarded"),
    ("_agree", remembered, "_agree"),
    ("Snapshot.settle", remembered.Snapshot, "settle"),
]


def main(argv: list[str]) -> None:
    piece, options = argv[0], {}
    for item in argv[1:]:
        key, _, value = item.partition("=")
        options[key] = ast.literal_eval(value)
    cg = Callgrind()
    folder = Path(tempfile.mkdtemp(prefix="floor-pieces-"))
    lane = lanes.StoreLane(
        "pieces",
        lanes.issue_steps(WARM + WINDOW + 1),
        {"window": range(WARM + 1, WARM + WINDOW + 1)},
        folder / "pieces.db",
        pattern=PATTERN,
        options=options,
    )
    toggle = cg.toggle
    extra: Callable[[], object] = _nothing
    only = piece.startswith("only:")
    for label, owner, name in PIECES:
        if label != piece.removeprefix("only:"):
            continue
        inner = getattr(owner, name)

        def hidden(*args: Any, _inner: Any = inner, **kwargs: Any) -> Any:
            toggle()
            try:
                return _inner(*args, **kwargs)
            finally:
                toggle()

        setattr(owner, name, hidden)
        if label == "nothing":
            extra = hidden  # the wrapper alone, called once a save (as each piece is)
    for n in range(1, WARM + WINDOW + 1):
        save = lane.advance(n)
        if n <= WARM:
            save()
            continue
        if n == WARM + 1:
            cg.start()
        if only:
            save()  # collected inside the piece only
            extra()
            continue
        toggle()
        save()
        extra()
        toggle()
    cg.dump(piece)
    cg.stop()
    lane.close()


if __name__ == "__main__":
    main(sys.argv[1:])
