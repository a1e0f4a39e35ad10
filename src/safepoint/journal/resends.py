"""Re-sent model calls, noted durably: the marker ``model_call`` writes before a re-send
(``replay.marker``), and the count integrations read back from the journal.

A model call found in flight (an intent, no result) was cut by a crash:
``model_call`` sends it again, and the repeat is paid. The tally counts it,
but a tally lives in the process — killed after the re-send and before the
integration's next save, the process takes that count with it. So the
re-send is noted first, as an entry of its own: an intent (no result) under
``<key>!resent:<writer>`` (``marker``), put if absent, fenced by the writer's
lease. Whoever counts the run's cost later (a resumed turn, a save) reads
the markers (``counted``): one re-sent call each, estimated by the usage its
call was finally recorded with — or, not recorded yet (re-sent, then killed
again), ``pending``: its integration adds the estimate once it records the call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from safepoint.records import Recorded

from .replay import RESENT, Tally, marker

__all__ = ["RESENT", "Resends", "counted", "marker", "sent_key"]


def sent_key(key: str) -> str | None:
    """The key of the call a marker notes; None when ``key`` is no marker."""
    sent, found, _ = key.partition(RESENT)
    return sent if found else None


@dataclass(slots=True)
class Resends:
    """The re-sent calls markers note: ``tally.resent`` and ``tally.lost_*`` (each estimated by
    its call's recorded usage), and the calls not recorded yet (key -> markers)."""

    tally: Tally = field(default_factory=Tally)
    pending: dict[str, int] = field(default_factory=dict)


def counted(entries: Iterable[Recorded], within: Callable[[str], bool] | None = None) -> Resends:
    """The markers among a run's ``entries`` counted: those noting a call whose key ``within``
    accepts (an integration's model calls: a key a model's tool-call id made look like a marker
    notes none of them)."""
    listed = list(entries)
    done = {entry.key: entry for entry in listed if entry.done}
    out = Resends()
    for entry in listed:
        sent = sent_key(entry.key)
        if sent is None or entry.done or (within is not None and not within(sent)):
            continue  # a marker is an intent: never done
        out.tally.resent += 1
        call = done.get(sent)
        if call is not None:
            out.tally.lost(call.usage)
        else:
            out.pending[sent] = out.pending.get(sent, 0) + 1
    return out
