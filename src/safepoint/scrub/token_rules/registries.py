"""Package and model registries: npm, PyPI and Hugging Face tokens."""

from __future__ import annotations

from safepoint.scrub.engine.rule import Rule

from .parts import DASHED_END, DASHED_START, TOKEN_END, TOKEN_START, prefixed

RULES: tuple[Rule, ...] = (
    prefixed(
        "npm-token",
        TOKEN_START + r"npm_[A-Za-z0-9]{36}" + TOKEN_END,
        ("npm_",),
        "npm access token: npm_ + 36 base62 characters",
        strict=True,
    ),
    prefixed(
        "pypi-token",
        # (a word boundary before it: a prefix repeated inside one run fails at once, not after a read)
        DASHED_START + r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,}+" + DASHED_END,
        ("pypi-AgEIcHlwaS5vcmc", "pypi-AgENdGVzdC5weXBpLm9yZw"),
        "PyPI API token: pypi- + a macaroon whose location is pypi.org (or test.pypi.org), however long",
        max_length=None,
    ),
    prefixed(
        "huggingface-token",
        TOKEN_START + r"(?:hf|api_org)_[A-Za-z0-9]{30,40}" + TOKEN_END,
        ("hf_", "api_org_"),
        "Hugging Face user access token hf_ (or org token api_org_) + 34 letters",
        strict=True,
    ),
)
