"""What a saver remembers about the thread runs it wrote or read, so a turn costs what it adds.

LangGraph hands ``put`` the whole message channel every time, and loads the
whole latest checkpoint at the start of every ``invoke``. Both would make a
turn cost O(history) — converting, comparing and re-reading every message —
if the saver did not remember what it last stored. So each thread run's cache
entry (``cache.CheckpointCache``, keyed by run id) carries a ``Memo``: the last
few steps this saver saved or loaded, each with its ``Log`` — the log entries
the store was given and the very message objects they were made from.

* ``put`` finds the new messages by **identity**: the messages of earlier
  turns are the same Python objects in the new channel value (LangGraph's
  reducers copy the list, not the messages), so the stored prefix is skipped
  by one C-level list comparison that costs a pointer compare per message
  (``same_prefix``), and only the rest is converted and compared. Messages
  that are equal but not the same objects (another process, a reducer that
  rebuilds them) are compared field by field, and converted again only
  where they differ.
* ``get_tuple`` answers from the memo when one O(1) query (``store.run``)
  shows the run's head is still the step the memo holds (same step, same
  commit time): the messages are the remembered objects, every other value
  is decoded afresh from the step's state, so LangGraph may change what it
  gets without touching the memo.
* ``put_writes`` for an older checkpoint, and ``get_tuple`` for a latest
  checkpoint that is not the head step, take the step from the memo instead
  of loading it: a stored step never changes.

The memo is a read cache, never a store of record: writes built on it are
fenced by the store (a save on a moved head is a ``Conflict``, after which the
entry is dropped and the head reloaded), and reads are validated first. A
step is served from memory only if decoding what was stored gives back what
is remembered: once the scrubber changes anything a save stored, the thread
is read from the store again until a load refreshes the memo.

Saved messages are treated as immutable, as the store treats its own: change
a message by replacing it (``add_messages`` does, by id), not in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from safepoint import Checkpoint

KEEP_STEPS = 4  # steps remembered per thread: the head, the latest checkpoint's, those late writes target


def same_prefix(old: list[Any], new: list[Any]) -> int:
    """How many leading items of ``new`` equal those of ``old`` — usually because they are the same objects.

    One C-level list comparison in the usual case (``old`` is a prefix of
    ``new``), where each item is the very object and costs a pointer compare;
    a Python loop only to find where they part.
    """
    count = min(len(old), len(new))
    if old[:count] == new[:count]:
        return count
    for i in range(count):
        a, b = old[i], new[i]
        if a is not b and a != b:
            return i
    return count  # pragma: no cover - the comparison above saw a difference


@dataclass(frozen=True, slots=True)
class Log:
    """A step's message log as this saver knows it.

    ``raw``: the log entries as the store was given them (or, after a load,
    as it returned them). ``sources``: the channel's message objects ``raw``
    was made from, item by item (None when unknown). ``fmt``: their format.
    ``faithful``: decoding the stored log gives ``sources`` back — false once
    the scrubber replaced something in a save that wrote part of this log.
    """

    raw: list[Any] = field(default_factory=list)
    sources: list[Any] | None = None
    fmt: str | None = None
    faithful: bool = True

    def prefix(self, count: int) -> Log:
        """The first ``count`` entries (a checkpoint that sees only part of its step's log)."""
        if count >= len(self.raw):
            return self
        sources = None if self.sources is None else self.sources[:count]
        return Log(self.raw[:count], sources, self.fmt, self.faithful)


@dataclass(frozen=True, slots=True)
class Step:
    """One step this saver saved or loaded: the checkpoint object, its log, and whether it can be served.

    ``faithful``: decoding ``cp`` (its state, and its log) gives what a load
    of the step would — a loaded step always, a saved one unless the
    scrubber changed something it or an earlier save stored.
    """

    cp: Checkpoint
    log: Log
    faithful: bool

    @classmethod
    def saved(cls, cp: Checkpoint, log: Log) -> Step:
        """A step just saved: the scrubber's report on the checkpoint says whether it changed anything."""
        clean = not cp.scrub_report
        log = Log(log.raw, log.sources, log.fmt, log.faithful and clean)
        return cls(cp, log, log.faithful)

    @classmethod
    def loaded(cls, cp: Checkpoint) -> Step:
        """A step as the store returned it."""
        return cls(cp, Log(list(cp.messages)), True)

    def with_sources(self, sources: list[Any], fmt: str) -> Step:
        """This step, knowing the message objects its whole log decodes to."""
        if len(sources) != len(self.log.raw):
            return self  # they are only part of the log: not worth remembering
        return Step(self.cp, Log(self.log.raw, sources, fmt, self.log.faithful), self.faithful)


@dataclass(frozen=True, slots=True)
class Memo:
    """The steps of one thread run this saver remembers (the cache entry's extra), newest last."""

    steps: tuple[Step, ...] = ()

    def step(self, number: int) -> Step | None:
        for known in self.steps:
            if known.cp.step == number:
                return known
        return None

    def head_log(self) -> Log | None:
        """The log of the head step (what the next step's log starts from)."""
        return self.steps[-1].log if self.steps else None

    def known_log(self) -> Log | None:
        """The newest log whose message objects are known: what ``encode_messages`` can skip."""
        return next((s.log for s in reversed(self.steps) if s.log.sources is not None), None)

    def adding(self, step: Step) -> Memo:
        """This memo with ``step`` (replacing what it knew of that step number), the oldest dropped."""
        kept = [s for s in self.steps if s.cp.step != step.cp.step]
        kept.append(step)
        kept.sort(key=lambda s: s.cp.step)
        return Memo(tuple(kept[-KEEP_STEPS:]))
