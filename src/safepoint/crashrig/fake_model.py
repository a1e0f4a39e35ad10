"""The deterministic fake model the scripted agents ask (the crash kit's and the demo's).

Nothing here is random or timed: a reply and its token counts, like a batch
document's text, are a function of the run's seed, the step and the prompt
(via sha256). So a run killed and resumed any number of times asks the same
questions and gets the same answers as an uninterrupted one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

PRICE_IN, PRICE_OUT = 0.3, 1.5  # cents per 1000 tokens, like a small hosted model


def derive(*parts: object) -> bytes:
    """sha256 of ``parts``: what every scripted choice derives from."""
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()


@dataclass(frozen=True, slots=True)
class Reply:
    """One fake model completion."""

    text: str
    tokens_in: int
    tokens_out: int


def fake_model(seed: int, step: int, prompt: str) -> Reply:
    """The model's reply to ``prompt`` at ``step``: a function of its arguments only."""
    h = derive("model", seed, step, prompt)
    return Reply(f"thought {h[:6].hex()}", len(prompt) // 4 + 40 + h[6] % 60, 10 + h[7] % 90)


def document_text(seed: int, index: int) -> str:
    """The text of batch document ``index``."""
    return f"document {index}: " + " ".join(derive("doc", seed, index, i).hex()[:8] for i in range(6))
