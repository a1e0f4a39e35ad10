"""The encryption section of docs/benchmarks.md (issue 18), from ``sections.encryption``'s results."""

from __future__ import annotations

from sections.encryption import (
    BLOB_THRESHOLD,
    BLOCK,
    EARLY_RUNS,
    LOADS,
    REKEY_RUNS,
    REKEY_STEPS,
    TARGET,
    EncryptionResult,
)

from report import templating


def render(result: EncryptionResult, *, command: str, heading: bool = True) -> str:
    return templating.render(
        "encryption/encryption.md.j2",
        heading=heading,
        command=command,
        r=result,
        BLOB_THRESHOLD=BLOB_THRESHOLD,
        BLOCK=BLOCK,
        EARLY_RUNS=EARLY_RUNS,
        LOADS=LOADS,
        REKEY_RUNS=REKEY_RUNS,
        REKEY_STEPS=REKEY_STEPS,
        TARGET=TARGET,
    )
