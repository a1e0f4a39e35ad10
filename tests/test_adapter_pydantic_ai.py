"""SafepointConversationStore against Pydantic AI's own InMemoryConversationStore.

Every scenario runs on ``InMemoryConversationStore`` and on
``SafepointConversationStore`` (SQLite and PostgreSQL, sync and async stores,
one adapter object reused and a fresh one for every call) with the same
inputs, and must observe the same results: create, append, load with limits,
list by scope, fork, branch, rewritten histories, delete, stale writes, and
hostile strings. Ids and revisions Pydantic AI mints at random are compared
by the order they first appear in, never by value.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
    InMemoryConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from adapter_checks import backend_store
from safepoint.adapters.pydantic_ai import SafepointConversationStore

Get = Callable[[], ConversationStore]  # the store object for the next call
Backend = Callable[[Path], AbstractAsyncContextManager[Get]]
WHEN = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
HOSTILE = [
    "../../x",
    "'; DROP TABLE safepoint_runs; --",
    "\u202eevil\u200b\u200dzero-width\ufeff",
    "nul\x00inside",
    "%2F..%00",
    "x" * 20_000,
]


def ask(text: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(content=text, timestamp=WHEN)], timestamp=WHEN)


def answer(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(content=text)], timestamp=WHEN, model_name="fake")


def turn(n: int, tag: str = "") -> list[ModelMessage]:
    return [ask(f"{tag}question {n}"), answer(f"{tag}answer {n}")]


# --- observing: what a call returned, as plain data with minted ids named by their order

_MINTED = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class Seen:
    """The observations of one scenario, minted ids replaced by ``<id N>`` in order of appearance."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._names: dict[str, str] = {}

    def name(self, value: Any) -> Any:
        if isinstance(value, str) and _MINTED.fullmatch(value):
            return self._names.setdefault(value, f"<id {len(self._names)}>")
        if isinstance(value, dict):
            return {key: self.name(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.name(item) for item in value]
        return value

    def add(self, value: Any) -> Any:
        self.items.append(self.name(plain(value)))
        return value

    async def outcome(self, call: Awaitable[Any]) -> Any:
        """The call's result, or the name of the error it raised (recorded either way)."""
        try:
            return self.add(await call)
        except (ConversationConflict, UserError, LookupError) as exc:
            self.add(f"raised {type(exc).__name__}")
            return None


def plain(value: Any) -> Any:
    if isinstance(value, Conversation):
        return {
            "messages": ModelMessagesTypeAdapter.dump_python(value.messages, mode="json"),
            "usage": dataclasses.asdict(value.usage),
            "id": value.conversation_id,
            "revision": value.revision,
            "deferred": value.deferred_tool_requests,
            "new_message_index": value.new_message_index,
        }
    if isinstance(value, ConversationRecord):
        fields = dataclasses.asdict(value)
        fields.pop("updated_at")  # a clock reading: compared by the listing order instead
        return fields
    if isinstance(value, ConversationEntry):
        (message,) = ModelMessagesTypeAdapter.dump_python([value.message], mode="json")
        return {"id": value.id, "parent": value.parent_id, "kind": value.kind, "message": message}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


# --- scenarios: each observes everything it does


async def create_append_delete(get: Get, seen: Seen) -> None:
    await seen.outcome(get().load("chat"))
    conversation = Conversation(conversation_id="chat", messages=turn(1))
    await seen.outcome(get().save(conversation))
    loaded = await seen.outcome(get().load("chat"))
    await seen.outcome(get().load("chat", limit=1))
    await seen.outcome(get().load("chat", limit=0))
    await seen.outcome(get().load("chat", limit=-1))
    loaded.messages += turn(2)
    await seen.outcome(get().save(loaded))
    await seen.outcome(get().save(loaded))  # nothing new: no entries, a new revision
    await seen.outcome(get().load_entries("chat"))
    await seen.outcome(get().load_entries("chat", limit=3))
    await seen.outcome(get().read_record("chat"))
    await seen.outcome(get().read_record("nobody"))
    await seen.outcome(get().list_conversations())
    await seen.outcome(get().delete("chat"))
    await seen.outcome(get().load("chat"))
    await seen.outcome(get().delete("chat"))  # already gone: nothing happens
    await seen.outcome(get().save(Conversation(conversation_id="chat", messages=turn(3))))
    await seen.outcome(get().load("chat"))
    await seen.outcome(get().list_conversations())


async def scopes_and_listing(get: Get, seen: Seen) -> None:
    for n, (cid, scope) in enumerate([("a1", "alice"), ("b1", "bob"), ("a2", "alice"), ("n1", None)]):
        await seen.outcome(get().save(Conversation(conversation_id=cid, messages=turn(n)), scope=scope))
    await seen.outcome(get().list_conversations(scope="alice"))
    await seen.outcome(get().list_conversations(scope="alice", limit=1))
    await seen.outcome(get().list_conversations(limit=0))
    await seen.outcome(get().list_conversations(limit=-1))
    await seen.outcome(get().list_conversations(scope="carol"))
    await seen.outcome(get().load("a1", scope="bob"))
    loaded = await seen.outcome(get().load("a1", scope="alice"))
    loaded.messages += turn(9)
    await seen.outcome(get().save(loaded, scope="bob"))  # another owner's conversation: refused
    await seen.outcome(get().save(loaded))  # keeps alice
    await seen.outcome(get().delete("a1", scope="bob"))  # left as it is
    await seen.outcome(get().load("a1"))
    await seen.outcome(get().delete("a1", scope="alice"))
    await seen.outcome(get().list_conversations(scope="alice"))
    await seen.outcome(get().list_conversations())


async def fork_and_branch(get: Get, seen: Seen) -> None:
    base = Conversation(conversation_id="base", messages=turn(1) + turn(2) + turn(3))
    await seen.outcome(get().save(base, scope="team"))
    entries = await seen.outcome(get().load_entries("base"))
    await seen.outcome(get().fork("base", at=2, new_conversation_id="fork-a"))
    await seen.outcome(get().fork("base", new_conversation_id="fork-all", scope="other"))
    await seen.outcome(get().fork("base", from_entry=entries[3].id, new_conversation_id="fork-b"))
    await seen.outcome(get().fork("base", at=1, new_conversation_id="fork-a"))  # taken
    await seen.outcome(get().fork("base", at=99, new_conversation_id="fork-x"))
    await seen.outcome(get().fork("nope", new_conversation_id="fork-y"))
    await seen.outcome(get().fork("base", at=1, from_entry=entries[0].id, new_conversation_id="z"))
    fork = await seen.outcome(get().load("fork-a"))
    fork.messages += turn(4, "fork ")
    await seen.outcome(get().save(fork))
    await seen.outcome(get().load("fork-a"))
    await seen.outcome(get().fork("fork-a", at=3, new_conversation_id="grandchild"))
    base_now = await seen.outcome(get().load("base"))
    await seen.outcome(get().branch("base", at=2, expected_revision="stale"))
    branched = await seen.outcome(get().branch("base", at=2, expected_revision=base_now.revision))
    branched.messages += turn(5, "branch ")
    await seen.outcome(get().save(branched))
    record = await seen.outcome(get().read_record("base"))
    back = await seen.outcome(
        get().branch("base", from_entry=record.branches[0], expected_revision=record.revision)
    )
    await seen.outcome(get().branch("base", from_entry="no-such-entry", expected_revision=back.revision))
    await seen.outcome(get().branch("base", expected_revision=back.revision))  # neither at nor from_entry
    await seen.outcome(get().load_entries("base"))
    await seen.outcome(get().read_entry(entries[0].id))
    await seen.outcome(get().read_entry("no-such-entry"))
    # Deleting the forked conversation leaves its forks whole; deleting every fork too frees it all.
    await seen.outcome(get().delete("base"))
    await seen.outcome(get().load("fork-a"))
    await seen.outcome(get().load("grandchild"))
    await seen.outcome(get().load_entries("fork-b"))
    for cid in ("fork-a", "fork-all", "fork-b", "grandchild"):
        await seen.outcome(get().delete(cid))
    await seen.outcome(get().read_entry(entries[0].id))
    await seen.outcome(get().list_conversations())


async def rewritten_history(get: Get, seen: Seen) -> None:
    await seen.outcome(get().save(Conversation(conversation_id="r", messages=turn(1) + turn(2))))
    loaded = await seen.outcome(get().load("r"))
    # Serialized and rebuilt by hand (no new_message_index), with the second turn edited.
    edited = Conversation(
        conversation_id="r",
        messages=turn(1) + turn(2, "edited "),
        revision=loaded.revision,
        usage=loaded.usage,
    )
    await seen.outcome(get().save(edited))
    await seen.outcome(get().read_record("r"))
    await seen.outcome(get().load("r"))
    again = await seen.outcome(get().load("r"))
    window = Conversation(
        conversation_id="r", messages=again.messages[-2:] + turn(3), revision=again.revision
    )
    window.new_message_index = 2
    await seen.outcome(get().save(window))
    await seen.outcome(get().load_entries("r"))


async def stale_writes(get: Get, seen: Seen) -> None:
    await seen.outcome(get().save(Conversation(conversation_id="s", messages=turn(1))))
    first, second = await get().load("s"), await get().load("s")
    first.messages += turn(2, "first ")
    second.messages += turn(2, "second ")
    await seen.outcome(get().save(first))
    await seen.outcome(get().save(second))  # loaded before the first save: stale
    await seen.outcome(get().save(Conversation(conversation_id="s", messages=turn(7))))  # never loaded
    record = await seen.outcome(get().read_record("s"))
    await seen.outcome(get().delete_record("s", expected_revision="not-it"))
    await seen.outcome(get().write_record(record, expected_revision=None))
    ghost = dataclasses.replace(record, head_id="no-such-entry", revision="r2")
    await seen.outcome(get().write_record(ghost, expected_revision=record.revision))
    await seen.outcome(get().delete_record("s", expected_revision=record.revision))
    await seen.outcome(get().delete_record("s", expected_revision=record.revision))  # gone
    await seen.outcome(get().write_record(record, expected_revision=record.revision))
    third = Conversation(conversation_id="s", messages=turn(8))
    await seen.outcome(get().save(third))
    # Concurrent saves of one loaded conversation: exactly one wins, whichever it is.
    copies = [await get().load("s") for _ in range(4)]
    for n, copy in enumerate(copies):
        copy.messages += turn(10 + n)
    store = get()
    outcomes = await asyncio.gather(*(store.save(copy) for copy in copies), return_exceptions=True)
    seen.add(sorted(type(o).__name__ for o in outcomes))
    winner = (await get().load("s")).messages[-1]
    seen.add(winner in [copy.messages[-1] for copy in copies])


async def hostile_strings(get: Get, seen: Seen) -> None:
    payload = "\x00 NUL, \u202e RTL, \u200b zero width, '; DROP TABLE x; -- ../../etc/passwd " + "y" * 200_000
    marker = {"$secret": "API_KEY", "$blob": {"digest": "sha256:00"}, "$typed": ["msgpack", []]}
    for n, text in enumerate(HOSTILE):
        messages = [
            ask(text + payload),
            ModelResponse(
                parts=[ToolCallPart(tool_name=text, args={text: marker}, tool_call_id=text)], timestamp=WHEN
            ),
            ModelRequest(
                parts=[ToolReturnPart(tool_name=text, content=marker, tool_call_id=text, timestamp=WHEN)]
            ),
            answer(text),
        ]
        await seen.outcome(get().save(Conversation(conversation_id=text, messages=messages), scope=text))
        await seen.outcome(get().load(text))
        await seen.outcome(get().list_conversations(scope=text))
        await seen.outcome(get().fork(text, at=n % 4, new_conversation_id=text + "/fork", scope=text))
        await seen.outcome(get().load(text + "/fork"))
    await seen.outcome(get().list_conversations())
    for text in HOSTILE:
        await seen.outcome(get().delete(text))
    await seen.outcome(get().list_conversations())


SCENARIOS = [
    create_append_delete,
    scopes_and_listing,
    fork_and_branch,
    rewritten_history,
    stale_writes,
    hostile_strings,
]


# --- the backends


@asynccontextmanager
async def in_memory(tmp: Path) -> AsyncIterator[Get]:
    del tmp
    store = InMemoryConversationStore()
    yield lambda: store


def safepoint_backend(kind: str, *, fresh: bool) -> Backend:
    """Ours on ``kind``; ``fresh``: a new adapter object for every call (on the same store)."""

    @asynccontextmanager
    async def backend(tmp: Path) -> AsyncIterator[Get]:
        async with backend_store(kind, tmp) as store:
            reused = SafepointConversationStore(store)
            yield (lambda: SafepointConversationStore(store)) if fresh else (lambda: reused)

    return backend


BACKENDS = {
    "sqlite-store": safepoint_backend("sqlite-store", fresh=False),
    "sqlite-store-fresh-adapters": safepoint_backend("sqlite-store", fresh=True),
    "sqlite-async": safepoint_backend("sqlite-async", fresh=False),
    "postgres-store": safepoint_backend("postgres-store", fresh=True),
    "postgres-async": safepoint_backend("postgres-async", fresh=False),
}


async def observe(backend: Backend, tmp: Path) -> dict[str, list[Any]]:
    observed = {}
    for scenario in SCENARIOS:
        where = tmp / scenario.__name__
        where.mkdir(parents=True, exist_ok=True)
        async with backend(where) as get:
            seen = Seen()
            await scenario(get, seen)
            observed[scenario.__name__] = seen.items
    return observed


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_same_results_as_the_in_memory_store(backend: str, tmp_path: Path) -> None:
    """Every scenario observes on SafepointConversationStore what InMemoryConversationStore observes."""
    expected = asyncio.run(observe(in_memory, tmp_path / "reference"))
    got = asyncio.run(observe(BACKENDS[backend], tmp_path / "safepoint"))
    for name, want in expected.items():
        for index, (mine, theirs) in enumerate(zip(got[name], want, strict=True)):
            assert mine == theirs, f"{name}: observation {index}"
