"""``CallJournal``: run an agent so a crash repeats no recorded model call and no tool effect.

The one line::

    - result = await Runner.run(agent, "hi", session=session)
    + result = await journal.run(agent, "hi", session=session)   # journal = CallJournal()

(``journal.run_sync`` for ``Runner.run_sync``; ``await journal.run_streamed``
for ``Runner.run_streamed``.) The session must be a ``SafepointSession``: its
run holds the journal's entries. Every model response and tool result of
the turn — handoff targets and agents used as tools included, models given
by name or as ``Model`` instances — is recorded as it completes; the same
call with the same input after a crash resumes the turn: the session is
rolled back to the turn's start, recorded calls are replayed instead of made
again, and only the call in flight at the crash is repeated (a model request
is re-sent and counted; a non-idempotent tool goes to its reconcile hook).

Non-idempotent tools write an intent before they run::

    @non_idempotent(reconcile=lambda key, name, args: Reconcile.skip("charged"))
    @function_tool
    def charge(amount: int) -> str:
        payments.charge(amount, idempotency_key=current_call_key())

or by name: ``CallJournal(non_idempotent={"charge": Reconcile.wait()})``.

Replay is not caching: an entry is replayed only into the same session's
same turn, at the same place, for the same request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from agents import Runner
from agents.tool import FunctionTool

from safepoint import InvalidArgument, Reconcile
from safepoint.journal import ActionWaiting, ToolPolicy, holding, raised_within

from .default_runner import install
from .graph import POLICY_ATTRIBUTE
from .jsonform import dumped
from .session import SafepointSession
from .turn import ACTIVE, CALL_KEY, Opened, Turn, close_turn, let_go, open_turn

Hook = Reconcile | Callable[[str, str, Any], Any] | None


def current_call_key() -> str | None:
    """The journal key of the tool call running now (an idempotency key for the service the
    tool calls: the same across resumes); None outside a journaled tool call."""
    return CALL_KEY.get()


def non_idempotent(tool: FunctionTool | None = None, *, reconcile: Hook = None) -> Any:
    """Mark a function tool whose effect must not happen twice (put it above ``@function_tool``).

    Its intent is recorded before it runs; found in flight after a crash, it
    goes to ``reconcile`` — a ``Reconcile`` (``rerun``, ``skip(result)``,
    ``wait``) or a hook ``(key, tool name, arguments) -> Reconcile``; without
    one the turn stops with ``ActionWaiting``.
    """

    def mark(marked: FunctionTool) -> FunctionTool:
        if not isinstance(marked, FunctionTool):
            raise InvalidArgument("non_idempotent marks a FunctionTool: put it above @function_tool")
        setattr(marked, POLICY_ATTRIBUTE, ToolPolicy(idempotent=False, reconcile=reconcile))
        return marked

    return mark if tool is None else mark(tool)


def _surfaced(error: BaseException) -> BaseException:
    """The error a journaled run ends with: a reconcile hook's ``wait`` as ``ActionWaiting`` (the
    SDK wraps what a tool raises in its own error), anything else as it was raised."""
    return raised_within(error, ActionWaiting) or error


def _store(session: SafepointSession) -> Any:
    if not isinstance(session, SafepointSession):
        raise InvalidArgument("a CallJournal runs on a SafepointSession (its run holds the journal)")
    return session.store


class CallJournal:
    """Runs agents on a ``SafepointSession`` with every call recorded and replayed on resume.

    ``non_idempotent``: tools by name, each with its reconcile (as
    ``@non_idempotent``). ``spend``: the price of a model call from its
    ``agents.usage.Usage`` (counters count 0 without it). ``hold``: the
    lease a turn holds its session with, renewed every third of it;
    ``wait``: how long a second caller waits for a turn another process is
    running (default: ``hold``). ``resolve_secrets``: as ``store.load``'s, for
    replayed values.

    ``last_turn`` is the latest turn this journal ran: its number, whether
    it resumed, the ``models`` and ``tools`` tallies (``safepoint.journal.Tally``:
    made, replayed, re-sent, divergences, not recordable) and ``counters()``,
    which the session's checkpoints also carry: tokens, spend, model and
    tool calls — one count per recorded call, whatever was replayed — and
    apart from them, labelled estimates, what crashes cost (``resent_calls``,
    ``lost_*_estimate``).
    """

    def __init__(
        self,
        *,
        non_idempotent: Mapping[str, Hook] | None = None,
        spend: Callable[[Any], float] | None = None,
        hold: float = 30.0,
        wait: float | None = None,
        resolve_secrets: Any = False,
    ) -> None:
        self.policies = {
            name: ToolPolicy(idempotent=False, reconcile=hook)
            for name, hook in (non_idempotent or {}).items()
        }
        self.spend, self.resolve_secrets = spend, resolve_secrets
        self.terms = holding.Terms(hold, hold if wait is None else wait)
        self.last_turn: Turn | None = None

    async def run(self, agent: Any, input: Any, *, session: SafepointSession, **kwargs: Any) -> Any:
        """``Runner.run(agent, input, session=session, **kwargs)``, journaled."""
        turn = self._turn(session, await holding.serve(_store(session), self._opening(session, input)))
        beat = holding.Beat(session.store, turn, self.terms, thread=False)
        token = ACTIVE.set(turn)
        try:
            result = await Runner.run(agent, input, session=session, **kwargs)
        except BaseException as error:
            await self._let_go(turn, beat)
            raise _surfaced(error) from error
        finally:
            ACTIVE.reset(token)
        beat.stop()
        await holding.serve(session.store, close_turn(turn))
        return result

    def run_sync(self, agent: Any, input: Any, *, session: SafepointSession, **kwargs: Any) -> Any:
        """``Runner.run_sync(…)``, journaled (the session's store must be a sync ``Store``)."""
        turn = self._turn(session, holding.drive(_store(session), self._opening(session, input)))
        beat = holding.Beat(session.store, turn, self.terms, thread=True)
        token = ACTIVE.set(turn)
        try:
            result = Runner.run_sync(agent, input, session=session, **kwargs)
        except BaseException as error:
            beat.stop()
            holding.drive(session.store, let_go(turn))
            raise _surfaced(error) from error
        finally:
            ACTIVE.reset(token)
        beat.stop()
        holding.drive(session.store, close_turn(turn))
        return result

    async def run_streamed(self, agent: Any, input: Any, *, session: SafepointSession, **kwargs: Any) -> Any:
        """``Runner.run_streamed(…)``, journaled — awaited, since the turn is opened first. The turn
        ends when the run does; ``stream_events()`` ends once it has."""
        turn = self._turn(session, await holding.serve(_store(session), self._opening(session, input)))
        beat = holding.Beat(session.store, turn, self.terms, thread=False)
        token = ACTIVE.set(turn)
        try:
            result = Runner.run_streamed(agent, input, session=session, **kwargs)
        except BaseException:
            await self._let_go(turn, beat)
            raise
        finally:
            ACTIVE.reset(token)
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def end(task: asyncio.Task[Any]) -> None:
            try:
                failed = task.cancelled() or task.exception() is not None or not result.is_complete
                failed = failed or getattr(result, "_stored_exception", None) is not None
                if failed:
                    await self._let_go(turn, beat)
                else:
                    beat.stop()
                    await holding.serve(session.store, close_turn(turn))
            finally:
                ended.set_result(None)

        task = result.run_loop_task
        assert task is not None  # the SDK starts the run's task before it returns the result
        task.add_done_callback(lambda done: asyncio.ensure_future(end(done)))
        events = result.stream_events

        async def stream_events() -> Any:
            try:
                async for event in events():
                    yield event
            except (GeneratorExit, asyncio.CancelledError):
                raise  # the caller stopped reading: the run (and its turn) ends on its own
            except BaseException as error:
                await ended  # the turn let go of its session before the error reaches the caller
                raise _surfaced(error) from error
            await ended
            if not task.cancelled() and task.exception() is not None:  # an end some SDKs keep quiet
                raise _surfaced(task.exception())  # type: ignore[arg-type]

        result.stream_events = stream_events  # type: ignore[method-assign]  # the turn ends with it
        return result

    # -- the turn's start and end, written once for the three ways in --------------------------

    def _opening(self, session: SafepointSession, input: Any) -> Any:
        install()
        return open_turn(session, {"input": dumped(input)}, holding.new_owner(), self.terms)

    def _turn(self, session: SafepointSession, opened: Opened) -> Turn:
        turn = Turn(
            session=session,
            number=opened.number,
            lease=opened.lease,
            base=opened.base,
            lost_before=opened.lost_before,
            policies=self.policies,
            spend=self.spend,
            resolve_secrets=self.resolve_secrets,
            resumed=opened.resumed,
            rolled_back=opened.rolled_back,
            pending=opened.pending,
        )
        session.turn = self.last_turn = turn
        return turn

    async def _let_go(self, turn: Turn, beat: holding.Beat) -> None:
        beat.stop()
        await holding.serve(turn.store, let_go(turn))  # the turn stays open: the same call resumes it
