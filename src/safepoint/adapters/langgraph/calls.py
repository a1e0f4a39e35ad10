"""Chat-model calls under the journal: replayed when recorded, else made and recorded.

``model_hook`` answers ``patches.py``'s patched methods: for a call in a
journaled turn, a ``ModelCall`` that runs ``safepoint.journal.model_call``
(the flow every integration shares) around the original method. A response
is recorded as LangChain's own dict form of its messages
(``message_to_dict``), plain JSON or nothing: a response holding anything
else is used but not recorded (``Tally.unrecorded``), never pickled.

A stream is pulled by its consumer, chunk by chunk, so its flow runs on a
relaying loop (``safepoint.relaying``): served like any other up to the
call, whose chunks go to the consumer as they come, then sent the whole
message, which it records. A stream that does not reach its end records nothing — the call is
in flight, and a resumed turn sends it again (counted as re-sent).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict
from langchain_core.outputs import ChatGeneration, ChatResult

from safepoint import codec
from safepoint.journal import NOT_RECORDABLE, Tally, model_call
from safepoint.records import CallUsage
from safepoint.relaying import Relay, arelaying, relaying
from safepoint.twins import Invoke, awaiting, blocking, translate

from . import patches
from .digests import MessageDigests
from .journal import Journal, call_scope, journal_of, key_base
from .tools import tool_scope
from .turns import Turn

__all__ = ["ModelCall", "model_hook", "request_digest"]


def model_hook(model: Any, messages: list[BaseMessage], stop: Any, kwargs: dict[str, Any], given: Any) -> Any:
    """The journaled call for a model request, or None when the request is not journaled."""
    config = patches.running_config(given)
    journal = journal_of(config)
    turn = None if journal is None else journal.turn_of(config)
    base = None if turn is None else key_base(turn, config)
    if journal is None or turn is None or base is None:
        return None
    scope = tool_scope()
    number = turn.next_call(call_scope(config, scope))
    key = base + ("" if scope is None else f"/tool:{scope}") + f"/model#{number}"
    return ModelCall(journal, turn, key, request_digest(model, messages, stop, kwargs, journal.digests))


def request_digest(
    model: Any,
    messages: list[BaseMessage],
    stop: Any,
    kwargs: dict[str, Any],
    digests: MessageDigests | None = None,
) -> str:
    """What guards a replay: the messages as the provider reads them (no message ids, which
    LangGraph renews when it re-runs a step; a chunk the same as the message it merges to),
    the model's parameters and its bound tools. ``digests``: the journal's memory of the
    messages it digested before (``digests.py``), so a call hashes only what it adds."""
    found = MessageDigests() if digests is None else digests
    return found.request(patches.llm_string(model, stop, kwargs), messages)


class ModelCall:
    """One model request of a journaled turn, under its key."""

    def __init__(self, journal: Journal, turn: Turn, key: str, request: str) -> None:
        self.journal, self.turn, self.key, self.request = journal, turn, key, request

    def _flow(
        self, send: Callable[[], Any], encode: Any, decode: Any, tally: Tally, *, is_async: bool
    ) -> Any:
        flow = model_call(
            self.turn.place(),
            self.key,
            self.request,
            send,
            encode=encode,
            decode=decode,
            usage_of=self._usage,
            tally=tally,
            resolve_secrets=self.journal.options.resolve_secrets,
        )
        return translate(flow, self.journal.rule(is_async=is_async))

    def generate(self, send: Callable[[], ChatResult]) -> ChatResult:
        tally = Tally()
        try:
            result: ChatResult = blocking(
                self._flow(send, encode_result, decode_result, tally, is_async=False)
            )
            return result
        finally:
            self.journal.absorb(tally, self.turn, model=True)

    async def agenerate(self, send: Callable[[], Any]) -> ChatResult:
        tally = Tally()
        try:
            return await awaiting(self._flow(send, encode_result, decode_result, tally, is_async=True))
        finally:
            self.journal.absorb(tally, self.turn, model=True)

    def _relayed(
        self, open_stream: Callable[[], Any], replay: Callable[[Any], Any], tally: Tally, *, is_async: bool
    ) -> Any:
        """The streamed call as a relaying flow (``safepoint.relaying``): the call itself relays
        its chunks to the consumer as they come, and the flow records their sum; a replayed
        message is relayed whole."""
        streamed = False

        def rule(request: Any) -> Any:
            nonlocal streamed
            if type(request) is Invoke and request.fn is _STREAMED:
                streamed = True
                return Relay(open_stream)
            return request

        message = yield from translate(
            self._flow(_STREAMED, encode_message, decode_message, tally, is_async=is_async), rule
        )
        if not streamed:
            yield Relay(lambda: replay(message))

    def stream(
        self, open_stream: Callable[[], Iterator[Any]], replay: Callable[[Any], Iterator[Any]]
    ) -> Iterator[Any]:
        tally = Tally()
        try:
            yield from relaying(self._relayed(open_stream, replay, tally, is_async=False))
        finally:
            self.journal.absorb(tally, self.turn, model=True)

    async def astream(
        self, open_stream: Callable[[], AsyncIterator[Any]], replay: Callable[[Any], AsyncIterator[Any]]
    ) -> AsyncIterator[Any]:
        tally = Tally()
        try:
            async for chunk in arelaying(self._relayed(open_stream, replay, tally, is_async=True)):
                yield chunk
        finally:
            self.journal.absorb(tally, self.turn, model=True)

    def _usage(self, result: Any) -> CallUsage | None:
        message = result.generations[0].message if isinstance(result, ChatResult) else result
        usage = getattr(message, "usage_metadata", None)
        if not usage:
            return None
        price = self.journal.options.price
        spend = float(price(usage)) if price is not None else 0.0
        return CallUsage(int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)), spend)


def _streamed() -> Any:  # pragma: no cover - a marker: the relaying loop streams in its place
    raise AssertionError("the stream marker is never called")


_STREAMED = _streamed


# -- the recorded form -----------------------------------------------------------------------


def encode_result(result: ChatResult) -> Any:
    data = {
        "generations": [
            {"message": message_to_dict(g.message), "info": g.generation_info} for g in result.generations
        ],
        "llm_output": result.llm_output,
    }
    return data if codec.is_plain_json(data) else NOT_RECORDABLE


def decode_result(data: Any) -> ChatResult:
    generations = [
        ChatGeneration(message=messages_from_dict([g["message"]])[0], generation_info=g.get("info"))
        for g in data["generations"]
    ]
    return ChatResult(generations=generations, llm_output=data.get("llm_output"))


def encode_message(message: Any) -> Any:
    if message is None:
        return NOT_RECORDABLE
    data = {"message": message_to_dict(message)}
    return data if codec.is_plain_json(data) else NOT_RECORDABLE


def decode_message(data: Any) -> Any:
    return messages_from_dict([data["message"]])[0]


patches.HOOKS["model"] = model_hook
