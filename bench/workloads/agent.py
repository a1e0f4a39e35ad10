"""The simulated agent both stores are fed: deterministic, seeded, built before timing.

Every step appends two messages: a user message (or, every ``TOOL_EVERY``-th
step, a tool message carrying a ~50 KB tool output) and an assistant reply of
about 500 bytes. Counters, a cursor and a small state dict change every step.
All text is seeded random words, so runs are repeatable and not trivially
compressible.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

SEED = 20240607
MESSAGE_BYTES = 500
TOOL_OUTPUT_BYTES = 50_000
TOOL_EVERY = 10
_VOCABULARY_SIZE = 4096

Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class AgentStep:
    """What one agent step adds: two messages, and the fields to overwrite."""

    step: int
    incoming: Message  # user or tool message
    reply: Message  # assistant message
    counters: dict[str, int | float]
    cursor: dict[str, Any]
    state: dict[str, Any]

    @property
    def messages(self) -> list[Message]:
        return [self.incoming, self.reply]

    def apply(self, cp: Any) -> None:
        """What the agent does to its checkpoint in this step (a ``safepoint.Checkpoint``;
        the step number is the caller's to move): two messages, and the fields overwritten."""
        cp.messages.extend(self.messages)
        cp.counters.update(self.counters)
        cp.cursors["main"] = self.cursor
        cp.state.update(self.state)


@dataclass(frozen=True, slots=True)
class Workload:
    steps: list[AgentStep]  # steps[i] has step number i + 1

    def content_json_bytes(self) -> int:
        """Sum of len(compact UTF-8 JSON) over every message (the primary content size)."""
        return sum(json_size(m) for s in self.steps for m in s.messages)

    def prefix_json_bytes(self, steps: int) -> int:
        """``content_json_bytes`` of the first ``steps`` steps."""
        return sum(json_size(m) for s in self.steps[:steps] for m in s.messages)

    def content_text_bytes(self) -> int:
        """Sum of the UTF-8 length of every message's ``content`` string alone."""
        return sum(len(m["content"].encode()) for s in self.steps for m in s.messages)


def json_size(message: Message) -> int:
    return len(json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode())


def build_workload(spec: dict[str, Any]) -> Any:
    """The workload a ``pg_writer`` spec names: ``spec["steps"]`` steps of this module's agent,
    or of ``workloads.blobs``'s with ``"workload": "blobs"``."""
    if spec.get("workload") == "blobs":
        from workloads import blobs as blob_workload  # noqa: PLC0415 (it imports this module)

        return blob_workload.build(spec["steps"])
    return build(spec["steps"])


def build(steps: int, seed: int = SEED) -> Workload:
    """The first ``steps`` agent steps (step numbers 1..steps)."""
    rng = random.Random(seed)
    vocabulary = [random_word(rng) for _ in range(_VOCABULARY_SIZE)]
    totals = Totals()
    out: list[AgentStep] = []
    for n in range(1, steps + 1):
        if n % TOOL_EVERY == 0:
            incoming: Message = {
                "id": f"m{n:05d}-tool",
                "role": "tool",
                "tool_call_id": f"call_{n:05d}",
                "content": random_text(rng, vocabulary, TOOL_OUTPUT_BYTES),
            }
        else:
            incoming = {
                "id": f"m{n:05d}-user",
                "role": "user",
                "content": random_text(rng, vocabulary, MESSAGE_BYTES),
            }
        out.append(totals.step(n, incoming, rng, vocabulary))
    return Workload(out)


@dataclass(slots=True)
class Totals:
    """The agent's running counters, and the rest of a step around its incoming message."""

    tokens_in: int = 0
    tokens_out: int = 0
    spend: float = 0.0

    def step(self, n: int, incoming: Message, rng: random.Random, vocabulary: list[str]) -> AgentStep:
        """Step ``n``: ``incoming``, a ~500-byte reply, the counters moved on, a cursor and state."""
        reply: Message = {
            "id": f"m{n:05d}-assistant",
            "role": "assistant",
            "content": random_text(rng, vocabulary, MESSAGE_BYTES),
        }
        self.tokens_in += rng.randint(200, 2000)
        self.tokens_out += rng.randint(50, 400)
        self.spend = round(self.spend + rng.uniform(0.0005, 0.01), 6)
        return AgentStep(
            step=n,
            incoming=incoming,
            reply=reply,
            counters={"tokens_in": self.tokens_in, "tokens_out": self.tokens_out, "spend_usd": self.spend},
            cursor={"page": n // 7, "offset": (n * 37) % 1000, "source": "crawler"},
            state={"plan": f"subtask-{n % 13}", "attempt": n % 3, "done": False},
        )


def random_word(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 10)))


def random_text(rng: random.Random, vocabulary: list[str], size: int) -> str:
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(vocabulary)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size]
