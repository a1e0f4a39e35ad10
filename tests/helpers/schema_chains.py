"""The chains of a small app whose checkpoint shape changed three times (for the schema tests).

Version 1 and 2 messages are ``{"role", "text"}``; version 3 renamed ``text``
to ``content``. Version 2 added ``state.tags``; version 4 renamed
``state.n`` to ``state.count``. Each chain is what that version's code ships.
"""

from __future__ import annotations

from typing import Any

from safepoint.migrations import MigrationChain


def add_tags(cp: dict[str, Any]) -> dict[str, Any]:
    cp["state"].setdefault("tags", [])
    return cp


def text_to_content(cp: dict[str, Any]) -> dict[str, Any]:
    cp["messages"] = [
        {("content" if k == "text" else k): v for k, v in message.items()} for message in cp["messages"]
    ]
    return cp


def rename_counter(cp: dict[str, Any]) -> dict[str, Any]:
    cp["state"]["count"] = cp["state"].pop("n")
    return cp


V1 = MigrationChain(current=1)
V2 = MigrationChain(current=2, migrations={1: add_tags})
V3 = MigrationChain(current=3, migrations={1: add_tags, 2: text_to_content})
V4 = MigrationChain(current=4, migrations={1: add_tags, 2: text_to_content, 3: rename_counter})
CHAINS = {1: V1, 2: V2, 3: V3, 4: V4}


def broken_v4() -> MigrationChain:
    """Version 4 with a bug: the rename fails on odd counters."""

    def buggy(cp: dict[str, Any]) -> dict[str, Any]:
        if cp["state"]["n"] % 2:
            raise KeyError("count")
        return rename_counter(cp)

    return MigrationChain(current=4, migrations={1: add_tags, 2: text_to_content, 3: buggy})
