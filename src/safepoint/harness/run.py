"""``Run`` and ``AsyncRun``, written once: the step loop of a hand-written harness.

Each public method is an entry (``safepoint.twins``) of ``Runs``: it builds
the flow of the call — the run's own (``core.py``, ``lifecycle.py``) inside
``Runs._call``, which checks the ``Run`` is open, serves the flow's requests
under the run's lease or hold (``leased.py``) and lets go when the run stops
running. ``Run`` blocks on a ``Store`` to run each flow, ``AsyncRun``
(``asyncrun.py``) awaits an ``AsyncStore``: the same entries, the same
names, signatures and docstrings.

A ``Run`` is the run's one live writer: ``start``, ``resume``, ``open``,
``resume_with`` and ``set_budget`` hold the run's lease (``exclusive.py``,
``holders.py``) until ``close`` (or the end of a ``with`` block), a commit
that leaves the run not running, or the ``Run``'s garbage collection; every
save is made under it. A second opener waits, then gets ``RunHeld``. In a
``Worker``'s handler (``job.open_run()``) the worker's lease is the one (``leased.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Mapping
from datetime import timedelta
from functools import partial
from typing import Any, ClassVar, Concatenate, Generic, ParamSpec, TypeVar, overload

from safepoint.errors import LeaseLost
from safepoint.flow import bound
from safepoint.model import Checkpoint, JSONDict, Status
from safepoint.records import CallUsage, CheckpointInfo, Lease
from safepoint.store import AsyncStore, Store
from safepoint.twins import A, B, Blocking, Flow, Written, entry

from . import lifecycle
from .actions import ReconcileHook
from .budgets import Budget
from .core import RunCore
from .errors import RunStatusError
from .exclusive import DEFAULT_HOLD, Terms
from .holders import Hold, Holding
from .leased import held, leased
from .view import RunView

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")
S = TypeVar("S", Store, AsyncStore)


class Opener(Written, Generic[P]):
    """An entry that opens a run (``Run.open``…): a class method of ``Run`` taking a ``Store``
    and returning the ``Run``, of ``AsyncRun`` taking an ``AsyncStore`` and returning a
    coroutine of the ``AsyncRun``."""

    of_class = True

    def __init__(self, build: Callable[Concatenate[Any, Any, P], Flow[Any]]) -> None:
        super().__init__(build)

    @overload
    def __get__(self, instance: Any, owner: type[B]) -> Callable[Concatenate[Store, P], B]: ...
    @overload
    def __get__(
        self, instance: Any, owner: type[A]
    ) -> Callable[Concatenate[AsyncStore, P], Coroutine[Any, Any, A]]: ...
    def __get__(self, instance: Any, owner: type[Any]) -> Any:
        raise TypeError(f"{self.name} opens a Run or an AsyncRun, not a {owner.__name__}")


def opener(build: Callable[Concatenate[Any, Any, P], Flow[Any]]) -> Opener[P]:
    return Opener(build)


class Runs(RunView, Generic[S]):
    """What ``Run`` and ``AsyncRun`` are, written once (``S``: the kind of store)."""

    _holds: ClassVar[type[Hold]]  # the flavour's hold: a heartbeat thread, or a task

    def __init__(
        self, store: S, core: RunCore, *, lease: Lease | None = None, terms: Terms | None = None
    ) -> None:
        super().__init__(core)
        self._store: S = store
        self._closed = False
        self._holding: Hold | None = None
        if lease is not None:
            self._served: Callable[[Flow[Any]], Flow[Any]] = partial(leased, store, lease)
        else:
            self._holding = self._holds(store, terms or Terms.of(DEFAULT_HOLD, None))
            self._holding.attach(self)
            self._served = partial(held, store, self._holding)

    @property
    def store(self) -> S:
        return self._store

    # -- what every entry's flow goes through ------------------------------------------

    def _call(self, flow: Flow[T]) -> Flow[T]:
        """``flow`` served for this ``Run``: refused once it is closed or its hold was lost,
        its requests made calls of the store under the run's lease or hold, and the run let
        go when the flow leaves it not running."""
        holding = self._holding
        if self._closed:
            raise RunStatusError(self.run_id, self.status.value, "this Run was closed: open the run again")
        if holding is not None and holding.lost and holding.lease is not None:
            raise LeaseLost(self.run_id, holding.lease.epoch, "another writer holds the run now")
        served: Flow[T] = bound(self._store, self._served(flow))
        if holding is None:
            return (yield from served)
        holding.enter()
        try:
            return (yield from served)
        finally:
            holding.leave()
            if self._core.cp.status is not Status.RUNNING:  # waiting, done, failed …: let others in
                yield from holding.releasing()

    def _begun(self, flow: Flow[None]) -> Flow[None]:
        """An opening flow; if it fails, the hold it may have taken is let go."""
        try:
            yield from self._call(flow)
        except BaseException:
            yield from self._closing()
            raise

    def _closing(self) -> Flow[None]:
        self._closed = True
        if self._holding is not None:
            yield from self._holding.releasing()

    @entry
    def close(self) -> Flow[None]:
        """Let go of the run: another writer may take it at once. Nothing is saved (commit first).
        Calling it again does nothing; the ``Run`` refuses any further step. ``with`` (``async with``)
        calls it."""
        return self._closing()

    # -- starting and resuming ------------------------------------------------

    @opener
    def start(
        cls: type[Runs[Any]],
        store: Store | AsyncStore,
        run_id: str | None = None,
        *,
        budget: Budget | None = None,
        labels: dict[str, str] | None = None,
        state: JSONDict | None = None,
        cursors: JSONDict | None = None,
        messages: list[JSONDict] | None = None,
        reconcile: Mapping[str, ReconcileHook] | None = None,
        lease: Lease | None = None,
        hold: float | timedelta = DEFAULT_HOLD,
        wait: float | timedelta | None = None,
    ) -> Flow[Runs[Any]]:
        """Create a new run (``Conflict`` if ``run_id`` exists), save its step 0 and hold it
        as ``open`` does."""
        run = cls(store, RunCore(reconcile), lease=lease, terms=Terms.of(hold, wait))
        new = lifecycle.NewRun(run_id, budget, labels, state, cursors, messages)
        yield from run._begun(lifecycle.start(run._core, new, run._holding))
        return run

    @opener
    def resume(
        cls: type[Runs[Any]],
        store: Store | AsyncStore,
        run_id: str,
        *,
        resolve_secrets: Any = False,
        reconcile: Mapping[str, ReconcileHook] | None = None,
        lease: Lease | None = None,
        hold: float | timedelta = DEFAULT_HOLD,
        wait: float | timedelta | None = None,
    ) -> Flow[Runs[Any]]:
        """Continue the run from its latest checkpoint (``NotFound`` if there is none).

        ``resolve_secrets`` is passed to ``store.load``. An action the crash left
        pending is decided by its tool's ``reconcile`` hook (the run may stop as
        ``waiting``); a run already over budget is saved as failed and
        ``BudgetExceeded`` raised. A run that is done, waiting or failed comes
        back with ``active`` False. The run is held as ``open`` holds it.
        """
        run = cls(store, RunCore(reconcile), lease=lease, terms=Terms.of(hold, wait))
        yield from run._begun(lifecycle.resume(run._core, run_id, resolve_secrets, run._holding))
        return run

    @opener
    def open(
        cls: type[Runs[Any]],
        store: Store | AsyncStore,
        run_id: str,
        *,
        budget: Budget | None = None,
        labels: dict[str, str] | None = None,
        state: JSONDict | None = None,
        cursors: JSONDict | None = None,
        messages: list[JSONDict] | None = None,
        resolve_secrets: Any = False,
        reconcile: Mapping[str, ReconcileHook] | None = None,
        lease: Lease | None = None,
        hold: float | timedelta = DEFAULT_HOLD,
        wait: float | timedelta | None = None,
    ) -> Flow[Runs[Any]]:
        """Resume ``run_id`` if it exists, else start it with the given budget, labels,
        state, cursors and messages (which are ignored for an existing run: what it
        stored wins). The call to put at the top of an agent that may be restarted.

        The run is held until ``close`` (or the end of a ``with`` block), a
        commit that leaves it not running, or this object's garbage
        collection: no other writer takes it meanwhile. Its lease lasts
        ``hold`` seconds, renewed every third of that. An opener that finds
        it held waits up to ``wait`` seconds (default: ``hold``; 0: not at
        all), then raises ``RunHeld``; a holder on this host whose process
        is gone is taken over at once. With ``lease=job.lease`` (in a
        ``Worker``'s handler) the worker's lease is the one, and nothing
        more is held. See docs/harness.md, "One live writer".
        """
        run = cls(store, RunCore(reconcile), lease=lease, terms=Terms.of(hold, wait))
        new = lifecycle.NewRun(run_id, budget, labels, state, cursors, messages)
        yield from run._begun(lifecycle.resume_or_start(run._core, new, resolve_secrets, run._holding))
        return run

    @opener
    def _from_loaded(
        cls: type[Runs[Any]],
        store: Store | AsyncStore,
        lease: Lease,
        cp: Checkpoint | None,
        hooks: Mapping[str, ReconcileHook] | None,
    ) -> Flow[Runs[Any]]:
        """``open`` under a worker's ``lease``, from ``cp``, the head it loaded (``Job.open_run``)."""
        run = cls(store, RunCore(hooks), lease=lease)
        yield from run._begun(lifecycle.resume_loaded(run._core, lease.run_id, cp, lease.run_status))
        return run

    @opener
    def resume_with(
        cls: type[Runs[Any]],
        store: Store | AsyncStore,
        run_id: str,
        answer: Any,
        *,
        resolve_secrets: Any = False,
        reconcile: Mapping[str, ReconcileHook] | None = None,
        lease: Lease | None = None,
        hold: float | timedelta = DEFAULT_HOLD,
        wait: float | timedelta | None = None,
    ) -> Flow[Runs[Any]]:
        """Answer a ``waiting`` run and resume it, from any process.

        A run waiting for input gets ``answer`` (any JSON value) as its next
        input (``run.take_input()``); a run waiting on an interrupted action
        takes a ``Reconcile.skip(result)`` or ``Reconcile.rerun()``. The answer
        is saved before this returns. ``RunStatusError`` if the run is not waiting.
        The run is held as ``open`` holds it.
        """
        run = cls(store, RunCore(reconcile), lease=lease, terms=Terms.of(hold, wait))
        yield from run._begun(lifecycle.resume_with(run._core, run_id, answer, resolve_secrets, run._holding))
        return run

    @opener
    def set_budget(
        cls: type[Runs[Any]],
        store: Store | AsyncStore,
        run_id: str,
        *,
        tokens: int | None = None,
        spend: float | None = None,
        steps: int | None = None,
        lease: Lease | None = None,
        hold: float | timedelta = DEFAULT_HOLD,
        wait: float | timedelta | None = None,
    ) -> Flow[Runs[Any]]:
        """Change a run's budget from any process: each limit given is set to that value
        (the others stay), saved as one new checkpoint, so the change is in the history.

        A run that its budget stopped (``failed``, over a limit) becomes
        ``running`` again when the new limits cover what it has used; resume it
        (or, for a worker's run, ``store.enqueue`` it). ``RunStatusError`` for
        a run that is done, cancelled, or failed for another reason. The run is
        held for the change (as ``open`` holds it) and let go: the ``Run`` comes back closed.
        """
        limits = Budget(tokens=tokens, spend=spend, steps=steps)  # refuses a bad limit
        run = cls(store, RunCore(), lease=lease, terms=Terms.of(hold, wait))
        try:  # a one-off: the Run comes back closed
            yield from run._call(lifecycle.set_budget(run._core, run_id, limits, run._holding))
        finally:
            yield from run._closing()
        return run

    # -- one step -------------------------------------------------------------

    @entry
    def action(self, tool: str, args: Any, fn: Callable[[str], R | Awaitable[R]]) -> Flow[R]:
        """Take a side-effecting action: save it as pending (with its idempotency key),
        then call ``fn(key)`` and return its result; the pending action is cleared in
        memory and the next save records it done.

        After a resume with this action pending (it must be the run's next
        action), the reconcile decision applies: ``rerun`` calls ``fn`` with the
        same key, ``skip`` returns the recorded result without calling it.
        On ``AsyncRun``, ``fn`` may be async (its result is awaited).

        The result is recorded in the run's call journal: resumed with this
        action pending, the run returns the recorded result without calling
        ``fn`` or asking the hook, which is asked only when no result was
        recorded (a result that is not JSON is not recorded: ``run.journal.unrecorded``).
        """
        return self._call(self._core.action(tool, args, fn))

    @entry
    def call(
        self,
        name: str,
        request: Any,
        fn: Callable[[Any], R | Awaitable[R]],
        *,
        usage: Callable[[R], CallUsage | None] | None = None,
    ) -> Flow[R]:
        """Make a call whose result a resumed run reuses — a model request above all: return
        ``fn(request)``, recorded in the run's call journal at this place of the step.

        A run that makes the step again gets the recorded result back without
        calling ``fn``, as long as ``request`` (any JSON; only its digest is
        kept) is the same; a changed request is called and recorded anew, and
        counted as a divergence. ``usage(result)`` says what the call cost
        (a ``CallUsage``): it is stored with the result and added to the
        run's counters once per recorded call, made or replayed (tokens and
        spend budgets apply, as in ``add_usage``). The result must be JSON
        (``NotJSONCompatible`` otherwise, its usage still counted). On
        ``AsyncRun``, ``fn`` may be async. See docs/harness.md, "The call journal".
        """
        return self._call(self._core.call(name, request, fn, usage))

    @entry
    def add_usage(self, *, tokens_in: int = 0, tokens_out: int = 0, spend: float = 0.0) -> Flow[None]:
        """Add a model call's usage. Over the tokens or spend limit, the run is saved as
        failed and ``BudgetExceeded`` raised."""
        return self._call(self._core.add_usage(tokens_in, tokens_out, spend))

    @entry
    def commit(self, *, status: Status = Status.RUNNING) -> Flow[CheckpointInfo]:
        """Save the step as one atomic checkpoint. Committing the last step the budget
        allows while the run would go on saves it as failed and raises ``BudgetExceeded``."""
        return self._call(self._core.commit(Status(status)))

    @entry
    def finish(self) -> Flow[CheckpointInfo]:
        """Commit the step as the run's last: status ``done``."""
        return self._call(self._core.commit(Status.DONE))

    @entry
    def fail(self) -> Flow[CheckpointInfo]:
        """Commit the step with status ``failed`` (record why in ``state`` first)."""
        return self._call(self._core.commit(Status.FAILED))

    @entry
    def wait_for_input(self, question: str) -> Flow[CheckpointInfo]:
        """Commit the step as ``waiting`` with ``question``; the process may exit. Continue
        later, from any process, with ``resume_with(store, run_id, answer)``."""
        return self._call(self._core.wait_for_input(question))


class Run(Runs[Store], Blocking):
    """One agent run, step by step: start or resume it, then per step append messages,
    add usage, take actions, advance cursors, update state, and ``commit``.

        run = Run.open(store, "ticket-42", budget=Budget(tokens=200_000),
                       reconcile={"search": Reconcile.rerun()})
        while run.active:
            reply = model(run.messages)
            run.add_usage(tokens_in=reply.usage.input, tokens_out=reply.usage.output, spend=reply.cost)
            run.append(reply.message)
            ...
            run.commit()            # one atomic checkpoint
        run.close()                 # or: with Run.open(...) as run:

    The run is held while the ``Run`` is open: no other writer takes it.
    See docs/harness.md for exclusivity, actions, budgets, human input and
    how a resumed run continues.
    """

    _holds = Holding
    _flavoured: ClassVar[dict[str, str]] = {"Store | AsyncStore": "Store", "R | Awaitable[R]": "R"}

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
