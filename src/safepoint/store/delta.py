"""The message delta: which messages a save appends to the run's log.

``plan_messages`` works out which messages a save must append, from what the
checkpoint object knows the store already holds (its ``StoredView``), so the
common case — messages appended since the last save — touches only the new
ones. ``finish_save`` records, after the commit, what the store now holds.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from safepoint import codec
from safepoint.messagelist import MessageList, StoredView, freeze
from safepoint.model import Checkpoint
from safepoint.records import from_micros

from .validate import encode_message


@dataclass(slots=True)
class MessagePlan:
    """What a save does to the message log.

    ``keep`` leading messages are already stored (in ``kept_ranges``);
    ``bodies`` are appended; ``chains`` covers the whole new view.
    """

    keep: int
    base: bytes | None  # the digest of the view planned against (None: none)
    kept_ranges: list[tuple[int, int]]
    bodies: list[bytes]
    chains: list[bytes]
    total: int

    def ranges(self, first_seq: int) -> list[tuple[int, int]]:
        """The new view's ranges when ``bodies`` get seqs from ``first_seq`` on."""
        ranges = list(self.kept_ranges)
        if self.bodies:
            end = first_seq + len(self.bodies)
            if ranges and ranges[-1][1] == first_seq:
                # Plain append: the last range just grows, so a run that is
                # never rewritten keeps a single range.
                ranges[-1] = (ranges[-1][0], end)
            else:
                ranges.append((first_seq, end))
        return ranges


def plan_messages(
    view: StoredView | None,
    messages: list[Any],
    encode: Callable[[Any, int], bytes] = encode_message,
    known: int = 0,
) -> MessagePlan:
    """Work out the delta between ``messages`` and the stored ``view``.

    Messages before the list's ``clean_prefix`` are known unchanged and are
    never looked at, nor are the first ``known`` (recognised by the store's
    memory of the run: ``remembered.py``). Past them (after a rewrite, or for a list that was not
    loaded from the store) messages are encoded — by ``encode``, which scrubs
    them as they will be stored — and compared by digest chain, so rewriting
    only a few recent turns still shares the untouched prefix.
    """
    total = len(messages)
    keep, chain, pending = 0, codec.EMPTY_CHAIN, None
    if view is not None:
        tracked = isinstance(messages, MessageList) and messages.stored is view
        clean = messages.clean_prefix if tracked else 0  # type: ignore[attr-defined]
        keep = min(max(clean, known), view.count, total)
        chain = view.chain_at(keep)
        while keep < min(total, view.count):
            body = encode(messages[keep], keep)
            candidate = codec.extend_chain(chain, (body,))[0]
            if candidate != view.chains[keep]:
                pending = body  # the first changed message: already encoded, reuse it
                break
            chain = candidate
            keep += 1
    bodies = [pending] if pending is not None else []
    bodies.extend(encode(messages[i], i) for i in range(keep + len(bodies), total))
    new_chains = codec.extend_chain(chain, bodies)
    if view is None:
        chains = new_chains
    elif keep == view.count == len(view.chains):
        # The common append case: extend the shared list in place (O(new)).
        # Views that already use it look only at their first ``count`` entries.
        chains = view.chains
        chains.extend(new_chains)
    else:
        chains = view.chains[:keep] + new_chains
    kept_ranges = view.ranges_for_prefix(keep) if view is not None else []
    base = view.digest if view is not None else None
    return MessagePlan(
        keep=keep, base=base, kept_ranges=kept_ranges, bodies=bodies, chains=chains, total=total
    )


def finish_save(
    cp: Checkpoint, plan: MessagePlan, ranges: list[tuple[int, int]], created_at: int, digest: bytes
) -> None:
    """After the commit: record in ``cp`` what the store now holds.

    New messages are swapped for frozen copies so that later in-place edits
    of stored messages fail loudly instead of going unsaved.
    """
    messages = cp.messages
    assert isinstance(messages, MessageList)  # Checkpoint.__setattr__ guarantees it
    # In place, touching only the new messages: rebuilding the list would make
    # every save cost O(history) again.
    fresh = [freeze(m) for m in messages[plan.keep :]]
    list.__setitem__(messages, slice(plan.keep, None), fresh)
    messages.stored = StoredView(cp.run_id, cp.step, digest, plan.total, plan.chains, tuple(ranges))
    messages.clean_prefix = plan.total
    cp.created_at = from_micros(created_at)
    cp.digest = digest.hex()
