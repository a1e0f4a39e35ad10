"""The simulated agent with large tool outputs (issue 5): 1 MB every 10th step, half of them repeats.

Same shape as ``workloads.agent`` (a user message or a tool message, then a
~500-byte assistant reply; counters, cursor and state change every step), but
every ``TOOL_EVERY``-th step's tool message carries a ``OUTPUT_BYTES`` output,
well above the store's 64 KiB offload threshold. Every second tool call
returns an output the agent has seen before (a file read again, the same
search repeated), picked with a seeded RNG among the earlier distinct ones,
so content addressing has something to deduplicate. Each message keeps its
own ``id``; only the ``content`` repeats.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from workloads.agent import (
    MESSAGE_BYTES,
    SEED,
    TOOL_EVERY,
    AgentStep,
    Message,
    Totals,
    json_size,
    random_text,
    random_word,
)

OUTPUT_BYTES = 1_000_000
_VOCABULARY_SIZE = 4096


@dataclass(frozen=True, slots=True)
class BlobWorkload:
    steps: list[AgentStep]  # steps[i] has step number i + 1
    kinds: list[str]  # per step: "small", "new" (a tool output not seen before) or "repeat"

    def prefix(self, steps: int) -> BlobWorkload:
        return BlobWorkload(self.steps[:steps], self.kinds[:steps])

    def unique_prefix_bytes(self, steps: int) -> int:
        return self.prefix(steps).unique_content_bytes()

    def content_json_bytes(self) -> int:
        """Sum of len(compact UTF-8 JSON) over every message, repeats counted each time."""
        return sum(json_size(m) for s in self.steps for m in s.messages)

    def unique_content_bytes(self) -> int:
        """The same, with a repeated tool output's ``content`` counted only the first time."""
        total = 0
        for step, kind in zip(self.steps, self.kinds, strict=True):
            incoming = {**step.incoming, "content": ""} if kind == "repeat" else step.incoming
            total += json_size(incoming) + json_size(step.reply)
        return total

    def distinct_outputs(self) -> int:
        return self.kinds.count("new")


def build(steps: int, seed: int = SEED) -> BlobWorkload:
    rng = random.Random(seed + 5)
    vocabulary = [random_word(rng) for _ in range(_VOCABULARY_SIZE)]
    outputs: list[str] = []
    totals = Totals()
    out: list[AgentStep] = []
    kinds: list[str] = []
    for n in range(1, steps + 1):
        if n % TOOL_EVERY == 0:
            call = n // TOOL_EVERY - 1
            if call % 2 == 1:
                content, kind = rng.choice(outputs), "repeat"
            else:
                outputs.append(random_text(rng, vocabulary, OUTPUT_BYTES))
                content, kind = outputs[-1], "new"
            incoming: Message = {
                "id": f"m{n:05d}-tool",
                "role": "tool",
                "tool_call_id": f"call_{n:05d}",
                "content": content,
            }
        else:
            kind = "small"
            text = random_text(rng, vocabulary, MESSAGE_BYTES)
            incoming = {"id": f"m{n:05d}-user", "role": "user", "content": text}
        out.append(totals.step(n, incoming, rng, vocabulary))
        kinds.append(kind)
    return BlobWorkload(out, kinds)
