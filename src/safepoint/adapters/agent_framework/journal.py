"""``CallJournal``: run a checkpointed workflow so a crash repeats no recorded model call and no
tool effect.

The one line::

    - result = await workflow.run(message)
    + result = await journal.run(workflow, message)   # journal = CallJournal(storage)

and after a crash, in any process, the framework's own resume through it::

    result = await journal.run(workflow, checkpoint_id=latest.checkpoint_id)

``storage`` is the ``SafepointCheckpointStorage`` the workflow checkpoints
to (the journal passes it as the run's ``checkpoint_storage``); the
workflow's safepoint run holds the journal's entries. The journal adds its
middleware (agent, chat and function middleware: ``calls.py``) to the agent
of each ``AgentExecutor`` once; outside a journaled run they change nothing.
A superstep cut by a crash runs again from the checkpoint before it, its
recorded model responses and tool results replayed (see ``turn.py`` for the
keys); only the call in flight at the crash is repeated — a model request is
re-sent and counted, a non-idempotent tool goes to its reconcile hook.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agent_framework import FunctionTool, Workflow

from safepoint import InvalidArgument, Reconcile, SafepointError
from safepoint.journal import ToolPolicy, holding

from . import framework, layout
from .calls import POLICY_ATTRIBUTE, ExecutorMiddleware, ModelMiddleware, ToolMiddleware
from .storage import SafepointCheckpointStorage
from .turn import ACTIVE, CALL_KEY, Turn, open_turn

Hook = Reconcile | Callable[[str, str, Any], Any] | None


def current_call_key() -> str | None:
    """The journal key of the tool call running now — an idempotency key for the service the tool
    calls, the same in every process that runs or resumes the call; None outside one."""
    return CALL_KEY.get()


def non_idempotent(tool: FunctionTool | None = None, *, reconcile: Hook = None) -> Any:
    """Mark a tool whose effect must not happen twice (put it above ``@tool``).

    Its intent is recorded before it runs; found in flight after a crash, it
    goes to ``reconcile`` — a ``Reconcile`` (``rerun``, ``skip(result)``,
    ``wait``) or a hook ``(key, tool name, arguments) -> Reconcile``; without
    one the run stops with ``ActionWaiting``.
    """

    def mark(marked: FunctionTool) -> FunctionTool:
        if not isinstance(marked, FunctionTool):
            raise InvalidArgument("non_idempotent marks a FunctionTool: put it above @tool")
        setattr(marked, POLICY_ATTRIBUTE, ToolPolicy(idempotent=False, reconcile=reconcile))
        return marked

    return mark if tool is None else mark(tool)


def _surfaced(error: BaseException) -> BaseException:
    """The journal's own stop (a reconcile hook's ``wait`` as ``ActionWaiting``, a lost lease, a
    bad hook) as the ``SafepointError`` it is, however the framework wrapped it."""
    if not isinstance(error, Exception):  # a cancellation, an interrupt: left as it is
        return error
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, SafepointError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return error


class CallJournal:
    """Runs workflows checkpointed on ``storage`` with every agent call recorded and replayed.

    ``non_idempotent``: tools by name, each with its reconcile (as
    ``@non_idempotent``; the journal's option wins). ``spend``: the price of
    one model response from its ``ChatResponse`` (counters count 0 without
    it). ``hold``: the lease a run holds its workflow with, renewed every
    third of it; ``wait``: how long a second process waits for a run another
    one holds (default ``hold``). ``resolve_secrets``: as ``store.load``'s,
    for replayed values.

    ``last_turn`` is the latest run this journal made: its ``models`` and
    ``tools`` tallies (``safepoint.journal.Tally``) and ``counters()``, which
    the workflow's checkpoints also carry.
    """

    def __init__(
        self,
        storage: SafepointCheckpointStorage,
        *,
        non_idempotent: Mapping[str, Hook] | None = None,
        spend: Callable[[Any], float] | None = None,
        hold: float = 30.0,
        wait: float | None = None,
        resolve_secrets: Any = False,
    ) -> None:
        if not isinstance(storage, SafepointCheckpointStorage):
            raise InvalidArgument("a CallJournal records into a SafepointCheckpointStorage")
        self.storage = storage
        self.policies = {
            name: ToolPolicy(idempotent=False, reconcile=hook)
            for name, hook in (non_idempotent or {}).items()
        }
        self.spend, self.resolve_secrets = spend, resolve_secrets
        self.terms = holding.Terms(hold, hold if wait is None else wait)
        self.middleware = [ExecutorMiddleware(), ModelMiddleware(), ToolMiddleware()]
        self.last_turn: Turn | None = None

    def install(self, workflow: Workflow) -> None:
        """Add the journal's middleware to the agent of each ``AgentExecutor`` (once: the
        middleware read everything from the running turn, so one set serves every journal)."""
        for executor in framework.agent_executors(workflow):
            agent = executor.agent
            if not hasattr(agent, "middleware"):
                raise InvalidArgument(
                    f"executor {executor.id!r} runs an agent without middleware: the journal needs an Agent"
                )
            present = list(agent.middleware or [])
            if not any(isinstance(m, ExecutorMiddleware) for m in present):
                agent.middleware = [*present, *self.middleware]

    async def run(self, workflow: Workflow, message: Any = None, **kwargs: Any) -> Any:
        """``workflow.run(message, **kwargs)`` journaled, checkpointing to the journal's storage."""
        if not isinstance(workflow, Workflow):
            raise InvalidArgument(f"CallJournal.run takes a Workflow, not {type(workflow).__name__}")
        if kwargs.get("stream"):
            raise InvalidArgument("a journaled workflow runs without stream=True (docs: limits)")
        if kwargs.get("checkpoint_storage") not in (None, self.storage):
            raise InvalidArgument("a journaled workflow checkpoints to the journal's storage")
        name = workflow.name
        if not isinstance(name, str) or not name or framework.named_by_builder(name):
            # The builder's made-up name is new in every process: a resume elsewhere would find
            # neither the run nor its entries.
            raise InvalidArgument("a journaled workflow needs a name of its own (WorkflowBuilder(name=...))")
        self.install(workflow)
        run_id, owner = layout.workflow_run_id(name), holding.new_owner()
        checkpoint_id = kwargs.get("checkpoint_id")
        storage, store = self.storage, self.storage.store
        opened = await holding.serve(
            store, open_turn(storage, run_id, name, checkpoint_id, owner=owner, terms=self.terms)
        )
        turn = Turn(
            store=store,
            workflow=workflow,
            run_id=run_id,
            owner=owner,
            lease=opened.lease,
            start=opened.start,
            lost_before=opened.lost_before,
            root=opened.root,
            policies=self.policies,
            spend=self.spend,
            resolve_secrets=self.resolve_secrets,
        )
        self.last_turn = turn
        storage.holds[run_id] = turn
        beat = holding.Beat(store, turn, self.terms, thread=False)
        token = ACTIVE.set(turn)
        try:
            return await workflow.run(message, checkpoint_storage=storage, **kwargs)
        except BaseException as error:
            surfaced = _surfaced(error)
            if surfaced is error:
                raise
            raise surfaced from error
        finally:
            ACTIVE.reset(token)
            beat.stop()
            if storage.holds.get(run_id) is turn:
                del storage.holds[run_id]
            await holding.serve(store, holding.release(store, turn.lease))
