"""Replay or call: the journal's two flows, written once for every integration.

A *model call* (any call whose result should be reused on resume: a model
request above all) and a *tool call* (a call with an effect) are each one
flow here, over the store's journal requests (``safepoint.flow``'s
``RecordedCall``, ``CallIntent``, ``RecordCall``) and ``Invoke`` for the call
itself, so ``Run``, LangGraph and the Agents SDK — sync or async — share them:

- a *done* entry at the call's key whose request digest matches is
  replayed: the call is not made, its recorded result comes back (decoded
  by the integration);
- a done entry whose request differs is a *divergence*: the call is made
  and recorded under a key of its own (the key with the request's digest),
  never replayed into the changed request;
- an *intent* with no result is the call in flight at a crash. A model
  call is sent again (counted as re-sent: its usage is the lost-spend
  estimate), noted first by a marker entry (``marker``; counted back by
  ``resends``) so the repeat stays counted if this process dies before
  the integration's next save — unless the intent is the writer's own (a
  failed attempt tried again: no crash); a non-idempotent tool goes to its reconcile hook
  (``Reconcile.rerun/skip/wait``, ``Run``'s vocabulary) — unless the intent's
  writer still holds the run's lease, which the caller waits out (the run
  is held for a turn, so a second process finds it held first).

Replay is not caching: an entry is read only by its own run, under its own
key (the call's place in the run), for the same request digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from safepoint import codec
from safepoint.errors import InvalidArgument, RunStatusError
from safepoint.flow import CallIntent, Flow, Invoke, RecordCall, RecordedCall
from safepoint.reconcile import Reconcile
from safepoint.records import CallUsage, Lease, Recorded
from safepoint.twins import Sleep

__all__ = [
    "NOT_RECORDABLE",
    "RESENT",
    "ActionWaiting",
    "Place",
    "Tally",
    "ToolPolicy",
    "diverged_key",
    "marker",
    "model_call",
    "raised_within",
    "tool_call",
]

E = TypeVar("E", bound=BaseException)

# What an ``encode`` returns for a result the framework's own serializer cannot turn into
# JSON: the call's result is used, never recorded (counted in ``Tally.unrecorded``), never pickled.
NOT_RECORDABLE: Any = object()
RESENT = "!resent:"  # <key>!resent:<writer>: <key>'s request was sent again after a crash by <writer>


@dataclass(frozen=True, slots=True)
class Place:
    """Where a journal records: the run its entries belong to, and the lease its writes are
    fenced by (None: the run must not be held by anyone else)."""

    run_id: str
    lease: Lease | None = None


@dataclass(slots=True)
class Tally:
    """What one journal saw: calls made and replayed, and the cost counted from entries.

    ``tokens_in``/``tokens_out``/``spend`` add each recorded call's usage once
    (whether this process made the call or replayed it), so counters built
    from them survive any number of resumes. ``resent`` counts model calls
    found in flight (an intent, no result) and sent again; ``lost_*`` is
    their cost as the re-sent call reported it — an estimate of what the
    crash cost, shown apart from the counters. ``reconciled`` counts tool
    calls found in flight and handed to their reconcile hook, whatever it
    decided; of those, a ``rerun`` is also ``called`` and a ``skip`` is
    ``skipped`` (recorded without a call), so each recorded call is counted
    once as ``called + replayed + skipped``.
    """

    called: int = 0
    replayed: int = 0
    resent: int = 0
    divergences: int = 0
    unrecorded: int = 0
    reconciled: int = 0
    skipped: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    spend: float = 0.0
    lost_tokens_in: int = 0
    lost_tokens_out: int = 0
    lost_spend: float = 0.0
    keys: list[str] = field(default_factory=list)  # keys replayed, in order (for tests and show)

    def count(self, usage: CallUsage | None) -> None:
        if usage is not None:
            self.tokens_in += usage.tokens_in
            self.tokens_out += usage.tokens_out
            self.spend += usage.spend

    def lost(self, usage: CallUsage | None) -> None:
        if usage is not None:
            self.lost_tokens_in += usage.tokens_in
            self.lost_tokens_out += usage.tokens_out
            self.lost_spend += usage.spend


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """How a tool's calls are journaled: ``idempotent`` tools are recorded after they return
    (a crash mid-call runs them again); a non-idempotent one writes an intent first and, found
    in flight, asks ``reconcile`` (a ``Reconcile`` or a hook taking the key, the tool's name
    and its arguments)."""

    idempotent: bool = True
    reconcile: Reconcile | Callable[[str, str, Any], Any] | None = None


def diverged_key(key: str, request: Any) -> str:
    """The key a call whose request differs from the recorded one is recorded under."""
    return f"{key}~{hashlib.sha256(codec.encode(request)).hexdigest()[:16]}"


def marker(key: str, lease: Lease | None) -> str:
    """The key noting that the writer holding ``lease`` re-sends the call at ``key`` (one marker
    per writer: a writer re-sends a call once; the next one, after another crash, its own)."""
    return f"{key}{RESENT}{'none' if lease is None else lease.worker_id}"


def model_call(
    place: Place,
    key: str,
    request: Any,
    send: Callable[[], Any],
    *,
    encode: Callable[[Any], Any],
    decode: Callable[[Any], Any],
    usage_of: Callable[[Any], CallUsage | None],
    tally: Tally,
    resolve_secrets: Any = False,
    retried: Callable[[Recorded], bool] | None = None,
) -> Flow[Any]:
    """The result of ``send()`` (a model request), replayed from the journal when recorded.

    ``encode`` turns a result into JSON (``NOT_RECORDABLE`` if it cannot),
    ``decode`` turns the recorded JSON back; ``usage_of`` reads a result's
    usage. An intent marks the request in flight before it is sent, so a
    crash before its result is recorded is counted as a re-sent call — and
    the re-send is marked before it is sent (``marker``), so that count
    survives this process too. ``retried`` tells an intent that is no crash
    (the integration's own failed attempt, made again) from one that is;
    by default, an intent written under this very lease is.
    """
    found: Recorded | None = yield RecordedCall(place.run_id, key, request, resolve_secrets)
    if found is not None and found.same_request is False:
        tally.divergences += 1
        key = diverged_key(key, request)
        found = yield RecordedCall(place.run_id, key, request, resolve_secrets)
    if found is not None and found.done:
        tally.replayed += 1
        tally.keys.append(key)
        tally.count(found.usage)
        tally.divergences += found.redacted > 0  # a value a rule redacted replays redacted
        return decode(found.result)
    if found is None:
        yield CallIntent(place.run_id, key, request, place.lease)
    resent = found is not None and not (_own(found, place) if retried is None else retried(found))
    if resent:
        # Noted before the call, as an entry: a count kept only in this process would die with it.
        yield CallIntent(place.run_id, marker(key, place.lease), None, place.lease)
    result = yield Invoke(send)
    tally.called += 1
    usage = usage_of(result)
    if resent:
        tally.resent += 1
        tally.lost(usage)
    return (yield from _recorded(place, key, request, result, usage, encode, decode, tally))


def tool_call(
    place: Place,
    key: str,
    name: str,
    args: Any,
    run: Callable[[], Any],
    *,
    policy: ToolPolicy,
    encode: Callable[[Any], Any],
    decode: Callable[[Any], Any],
    tally: Tally,
    resolve_secrets: Any = False,
) -> Flow[Any]:
    """The result of ``run()`` (a tool with an effect), replayed from the journal when recorded.

    ``args`` is the call's request (its digest guards replay). A
    non-idempotent tool writes its intent first; found in flight it is
    settled by ``policy.reconcile``: ``rerun`` runs it again, ``skip`` takes
    the hook's result as the call's (recorded), ``wait`` raises
    ``ActionWaiting`` for the integration to stop the run as waiting.
    """
    found: Recorded | None = yield RecordedCall(place.run_id, key, args, resolve_secrets)
    if found is not None and found.same_request is False:
        tally.divergences += 1
        key = diverged_key(key, args)
        found = yield RecordedCall(place.run_id, key, args, resolve_secrets)
    if found is not None and found.done:
        tally.replayed += 1
        tally.keys.append(key)
        tally.divergences += found.redacted > 0
        return decode(found.result)
    if not policy.idempotent:
        if found is None:
            found = yield CallIntent(place.run_id, key, args, place.lease)
            if found.done:  # another writer recorded it between the read and the intent
                tally.replayed += 1
                tally.keys.append(key)
                return decode(found.result)
        if not found.written and _is_other(found, place):
            if not found.done and found.writer_live:  # its writer is at it: wait, bounded by its lease
                found = yield from _waited(place, key, args, resolve_secrets)
            if found.done:  # finished by another writer meanwhile
                tally.replayed += 1
                return decode(found.result)
            decision = yield from _reconciled(policy, key, name, args)  # in flight at a crash
            tally.reconciled += 1
            if decision.decision == "wait":
                raise ActionWaiting(place.run_id, key, name, decision.question)
            if decision.decision == "skip":
                tally.skipped += 1
                return (yield from _recorded(place, key, args, decision.result, None, _same, decode, tally))
    result = yield Invoke(run)
    tally.called += 1
    return (yield from _recorded(place, key, args, result, None, encode, decode, tally))


def raised_within(error: BaseException, kind: type[E]) -> E | None:
    """The ``kind`` error (the journal's own stop: ``ActionWaiting``, a lost lease …) in the chain
    of errors a framework wrapped it in — its tool errors, its plugin errors — or None."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _own(found: Recorded, place: Place) -> bool:
    """Whether an intent was written under this writer's own lease: its failed attempt, tried
    again — no crash. (Without a lease it cannot be told: an integration says by ``retried``.)"""
    return not _is_other(found, place)


def _is_other(found: Recorded, place: Place) -> bool:
    """Whether an intent was written by another writer than this one (a lease of its own, or
    none: an intent without a lease cannot be told apart from a crashed writer's)."""
    mine = place.lease
    return mine is None or found.writer is None or (found.writer, found.epoch) != (mine.worker_id, mine.epoch)


def _waited(place: Place, key: str, args: Any, resolve_secrets: Any) -> Generator[Any, Any, Recorded]:
    """The entry once its writer recorded a result or lost its lease (which bounds the wait)."""
    pause = 0.01
    while True:
        yield Sleep(pause)
        pause = min(pause * 2, 0.5)
        found: Recorded = yield RecordedCall(place.run_id, key, args, resolve_secrets)
        if found.done or not found.writer_live:
            return found


def _reconciled(policy: ToolPolicy, key: str, name: str, args: Any) -> Flow[Reconcile]:
    hook = policy.reconcile
    if hook is None:
        return Reconcile.wait()
    if isinstance(hook, Reconcile):
        return hook
    decision = yield Invoke(hook, (key, name, args))
    if not isinstance(decision, Reconcile):
        raise InvalidArgument(
            f"the reconcile hook of tool {name!r} returned {type(decision).__name__}, not a Reconcile"
        )
    return decision


def _same(value: Any) -> Any:
    return value


def _recorded(  # noqa: PLR0917 - private, called with the call's whole context
    place: Place,
    key: str,
    request: Any,
    result: Any,
    usage: CallUsage | None,
    encode: Callable[[Any], Any],
    decode: Callable[[Any], Any],
    tally: Tally,
) -> Flow[Any]:
    """Record ``result`` (put if absent) and give back what the run goes on with: this result
    when this writer's entry is the one stored, else the entry another writer stored first."""
    encoded = encode(result)
    if encoded is NOT_RECORDABLE:
        tally.unrecorded += 1
        tally.count(usage)
        return result
    stored: Recorded = yield RecordCall(place.run_id, key, encoded, request, usage, place.lease)
    tally.count(stored.usage)
    return result if stored.written else decode(stored.result)


class ActionWaiting(RunStatusError):
    """A non-idempotent tool call was in flight at a crash and its reconcile hook said ``wait``:
    the run stops as waiting until a human decides (``resume_with`` / the integration's answer)."""

    def __init__(self, run_id: str, key: str, tool: str, question: str | None) -> None:
        self.key, self.tool, self.question = key, tool, question
        super().__init__(
            run_id,
            "waiting",
            f"tool {tool!r} was interrupted mid-call and its reconcile hook said wait",
        )
