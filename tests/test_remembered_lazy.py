"""The store's memory of a run after in-place saves (store/remembered.py), which record
their new messages without looking at them: what a fresh checkpoint's comparison needs
(which messages hold more than strings, where their stored bytes end) is worked out only
when a fresh save asks. Whatever mix of in-place and fresh saves built the memory, an
old message edited in place is stored as edited, and the memory stays within its bounds.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import safepoint
from helpers.recording import StatementLog
from safepoint import Checkpoint, codec
from safepoint.store.remembered import RunMemory

HEAD_READS = {"checkpoint_at", "view_chains"}  # what a save the memory covers never runs


def _message(step: int, role: str, extra: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"role": role, "content": f"{role} {step} «ünï» " + "lorem ipsum " * 5}
    if extra is not None:
        out["value"] = extra
    return out


def _stored(store: safepoint.Store, run_id: str) -> bytes:
    return codec.encode(list(store.load(run_id).messages))


@pytest.mark.parametrize(("old", "new"), [(1, 1.0), (True, 1), (0.0, -0.0), ("a", "b"), (None, "None")])
def test_an_edit_after_in_place_saves_is_stored(tmp_path: Path, old: Any, new: Any) -> None:
    """In-place saves (the checkpoint's own list, its messages frozen copies of the
    caller's), then a fresh checkpoint of the caller's list with an old dict edited in
    place, to a value Python may call equal: the edit is stored."""
    with safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}", scrubber=False) as store:
        conversation: list[dict[str, Any]] = []
        cp = Checkpoint(run_id="r")
        for step in range(6):
            if step:
                cp = cp.next()
            mine = [_message(step, "user", copy.deepcopy(old)), _message(step, "assistant")]
            conversation += mine
            cp.messages.extend(dict(m) for m in mine)
            store.save(cp)
        conversation[2]["value"] = new
        conversation.append(_message(6, "user"))
        store.save(Checkpoint(run_id="r", step=6, messages=list(conversation)))
        assert _stored(store, "r") == codec.encode(conversation)
        assert repr(store.load("r").messages[2]["value"]) == repr(new)


def test_in_place_saves_count_against_the_byte_budget(tmp_path: Path) -> None:
    """The memory's byte budget covers what in-place saves added: past it the run is
    forgotten, and its next fresh save compares against the store's chain values."""
    queries = StatementLog()
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}", observer=queries)
    store.settings = store.settings.replace(memory=RunMemory(max_bytes=1_000))
    try:
        cp = Checkpoint(run_id="big")
        for step in range(6):  # ~120 stored bytes a message: past 1,000 bytes after a few steps
            if step:
                cp = cp.next()
            cp.messages.extend([_message(step, "user"), _message(step, "assistant")])
            store.save(cp)
            queries.take()
            fresh = Checkpoint(run_id="big", step=cp.step + 1, messages=[dict(m) for m in cp.messages])
            store.save(fresh)
            ran = set(queries.take())
            held = sum(len(codec.encode(m)) for m in fresh.messages)
            assert (ran >= HEAD_READS) == (held > 1_000), (step, held, ran)
            cp = store.load("big")
        assert _stored(store, "big") == codec.encode([dict(m) for m in cp.messages])
    finally:
        store.close()


_values = st.one_of(st.integers(-2, 2), st.booleans(), st.sampled_from([0.0, 1.0, -0.0]), st.text(max_size=4))
_saves = st.lists(
    st.tuples(
        st.sampled_from(["in_place", "fresh", "edit_then_fresh", "replace_last_fresh", "load_then_in_place"]),
        st.integers(0, 1_000),
        _values,
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(saves=_saves)
def test_any_mix_of_in_place_and_fresh_saves_is_stored_exactly(
    tmp_path_factory: pytest.TempPathFactory, saves: list[tuple[str, int, Any]]
) -> None:
    path = tmp_path_factory.mktemp("mix") / "state.db"
    with safepoint.open_store(f"sqlite:///{path}") as store:
        conversation: list[dict[str, Any]] = [{"role": "system", "content": "start", "n": 1}]
        cp = Checkpoint(run_id="m", messages=[dict(m) for m in conversation])
        store.save(cp)
        for kind, at, value in saves:
            step = cp.step + 1
            if kind == "in_place":
                cp = cp.next()
                added = {"role": "user", "content": f"turn {step}", "value": value}
                conversation.append(added)
                cp.messages.append(dict(added))
            elif kind == "load_then_in_place":
                cp = store.load("m").next()
                added = {"role": "tool", "value": value}
                conversation.append(added)
                cp.messages.append(dict(added))
            else:
                if kind == "edit_then_fresh":
                    conversation[at % len(conversation)]["value"] = value  # the caller's own dict
                elif kind == "replace_last_fresh":
                    conversation[-1] = {"role": "assistant", "value": value}
                conversation.append({"role": "assistant", "content": f"answer {step}"})
                cp = Checkpoint(run_id="m", step=step, messages=copy.deepcopy(conversation))
            store.save(cp)
            loaded = store.load("m").messages
            assert codec.encode(list(loaded)) == codec.encode(conversation)
            assert [type(v) for m in loaded for v in m.values()] == [
                type(v) for m in conversation for v in dict(sorted(m.items())).values()
            ]
