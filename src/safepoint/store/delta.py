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
    kept_carriers: list[tuple[int, int]] | None  # None: the view did not know them
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

    def carriers(self, first_seq: int, step: int) -> list[tuple[int, int]] | None:
        """The carriers of ``ranges(first_seq)`` when ``bodies`` go in the row of ``step``."""
        if self.kept_carriers is None:
            return None
        carriers = list(self.kept_carriers)
        if self.bodies:
            if self.kept_ranges and self.kept_ranges[-1][1] == first_seq:
                carriers[-1] = (carriers[-1][0], step)  # the range ranges() grows
            else:
                carriers.append((step, step))
        return carriers


def plan_messages(
    view: StoredView | None,
    messages: list[Any],
    encode: Callable[[Any, int], bytes] = encode_message,
    known: int = 0,
    quick: Callable[[Any], bytes | None] | None = None,
) -> MessagePlan:
    """Work out the delta between ``messages`` and the stored ``view``.

    Messages before the list's ``clean_prefix`` are known unchanged and are
    never looked at, nor are the first ``known`` (recognised by the store's
    memory of the run: ``remembered.py``). Past them (after a rewrite, or for
    a list that was not loaded from the store) messages are encoded — by
    ``encode``, which scrubs them as they will be stored — and compared by
    digest chain, so rewriting only a few recent turns still shares the
    untouched prefix. ``quick`` (the canonical JSON of a message as given,
    None when it has none) is tried first in that comparison: a message the
    scrubber leaves as it is is then recognised without being scrubbed.
    A rewrite that would leave the view in too many small
    ranges stores the last of them again with its new messages (``compact_from``).
    """
    total = len(messages)
    keep, chain, pending = 0, codec.EMPTY_CHAIN, None
    if view is not None:
        tracked = isinstance(messages, MessageList) and messages.stored is view
        clean = messages.clean_prefix if tracked else 0  # type: ignore[attr-defined]
        keep = min(max(clean, known), view.count, total)
        chain = view.chain_at(keep)
        while keep < min(total, view.count):
            given = quick(messages[keep]) if quick is not None else None
            if given is None or codec.extend_chain(chain, (given,))[0] != view.chains[keep]:
                body = encode(messages[keep], keep)
                candidate = codec.extend_chain(chain, (body,))[0]
                if candidate != view.chains[keep]:
                    pending = body  # the first changed message: already encoded, reuse it
                    break
            else:
                candidate = view.chains[keep]
            chain = candidate
            keep += 1
    bodies = [pending] if pending is not None else []
    if pending is not None and view is not None:
        again = compact_from(view, keep, total)
        if again < keep:
            chain = view.chain_at(again)
            bodies[:0] = [encode(messages[i], i) for i in range(again, keep)]
            keep = again
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
    kept_ranges: list[tuple[int, int]]
    kept_carriers: list[tuple[int, int]] | None
    if view is None:
        kept_ranges, kept_carriers = [], []
    elif keep == view.count and len(view.ranges) == 1 and view.ranges[0][1] - view.ranges[0][0] == keep:
        # A run never rewritten, all of it kept (the usual append): its one range as it is,
        # without the two walks below (a Python frame each, on every save).
        kept_ranges = list(view.ranges)
        kept_carriers = None if view.carriers is None else list(view.carriers[:1])
    else:
        kept_ranges = view.ranges_for_prefix(keep)
        kept_carriers = view.carriers_for_prefix(keep)
    base = view.digest if view is not None else None
    return MessagePlan(
        keep=keep,
        base=base,
        kept_ranges=kept_ranges,
        kept_carriers=kept_carriers,
        bodies=bodies,
        chains=chains,
        total=total,
    )


# A rewrite starts a new range, and a run that rewrites its last message every
# step would have one per step: its rows carry ever longer ranges and its load
# looks up ever more of them. So ranges are size-tiered, as in a log-structured
# merge tree: when FANOUT ranges of one tier (tier t holds FANOUT**t to
# FANOUT**(t+1) - 1 messages) end the view, a save stores their messages again,
# with its own, as one range. A view then has under FANOUT ranges per tier
# (some 30 at 10,000 messages) and each message is stored again about
# log_FANOUT(n) times (4 at 10,000) over the run, only in runs that rewrite.
FANOUT = 8


def _tier(size: int) -> int:
    tier = 0
    while size >= FANOUT:
        size //= FANOUT
        tier += 1
    return tier


def compact_from(view: StoredView, keep: int, total: int) -> int:
    """Where a rewrite that keeps ``keep`` of ``view``'s messages and has
    ``total`` starts storing: ``keep``, or earlier, at the start of the tail
    ranges it stores again with its new messages."""
    sizes = [end - start for start, end in view.ranges_for_prefix(keep)]
    block, first = total - keep, len(sizes)  # the new range, and where its merged tail starts
    while True:
        tier, at = _tier(block), first
        while at > 0 and _tier(sizes[at - 1]) <= tier:
            at -= 1
        if first - at + 1 < FANOUT:
            break
        block += sum(sizes[at:first])
        first = at
    return sum(sizes[:first])


def finish_save(
    cp: Checkpoint,
    plan: MessagePlan,
    *,
    ranges: list[tuple[int, int]],
    carriers: list[tuple[int, int]] | None,
    created_at: int,
    digest: bytes,
) -> None:
    """After the commit: record in ``cp`` what the store now holds.

    New messages are swapped for frozen copies so that later in-place edits
    of stored messages fail loudly instead of going unsaved.
    """
    messages = cp.messages
    assert isinstance(messages, MessageList)  # Checkpoint.__setattr__ guarantees it
    # In place, touching only the new messages: rebuilding the list would make
    # every save cost O(history) again.
    fresh = list(map(freeze, messages[plan.keep :]))
    list.__setitem__(messages, slice(plan.keep, None), fresh)
    messages.stored = StoredView(
        cp.run_id,
        cp.step,
        digest,
        plan.total,
        plan.chains,
        tuple(ranges),
        None if carriers is None else tuple(carriers),
    )
    messages.clean_prefix = plan.total
    # Straight into the instance's fields: Checkpoint.__setattr__ only converts messages and
    # status, and a call of it per field is a Python frame on every save.
    fields = cp.__dict__
    fields["created_at"] = from_micros(created_at)
    fields["digest"] = digest.hex()
