"""A stored message as one row of ``safepoint show`` and ``diff``: who spoke, and what.

A run an adapter wrote (its ``safepoint.adapter`` label) is read by that
framework's decoder (``safepoint.conversation``): roles, text, tool calls and
the results that answer them, thinking, files and blobs, an unknown part by
its type name. Any other run's messages go through ``readable.describe``,
which knows the shapes users store themselves. Either way the row is plain
text made of stored values; ``output.cell`` and ``shown`` make control
characters visible and rich never reads it as markup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from safepoint.conversation import decoder
from safepoint.frameworks import ADAPTER_LABEL
from safepoint.readable import describe


def reader(labels: Mapping[str, str]) -> Callable[[Any], tuple[str, str]]:
    """How the messages of a run with these labels are read: ``message -> (role, text)``."""
    decode = decoder(labels.get(ADAPTER_LABEL))
    if decode is None:
        return describe

    def read(message: Any) -> tuple[str, str]:
        turn = decode(message)
        return turn.role, turn.text

    return read
