"""Model providers: Anthropic, OpenAI and Google API keys (Gemini's keys are Google API keys)."""

from __future__ import annotations

from safepoint.scrub.engine.rule import Rule

from .parts import DASHED_END, DASHED_START, prefixed

RULES: tuple[Rule, ...] = (
    prefixed(
        "anthropic-api-key",
        DASHED_START + r"sk-ant-(?:api|admin|oat|ort|sid)\d{2}-[A-Za-z0-9_-]{32,250}" + DASHED_END,
        ("sk-ant-",),
        "Anthropic key: sk-ant-api03- (API) or sk-ant-admin01- (Admin) + base64url",
        max_length=300,
    ),
    prefixed(
        "openai-api-key",
        DASHED_START + r"sk-(?!ant-)(?:(?:proj|svcacct|admin|None)-)?[A-Za-z0-9_-]{20,250}" + DASHED_END,
        ("sk-",),
        "OpenAI API key: sk- (legacy), sk-proj- (project), sk-svcacct- (service account), sk-admin-",
        max_length=300,
        strict=True,
    ),
    prefixed(
        "google-api-key",
        DASHED_START + r"AIza[0-9A-Za-z_-]{35}" + DASHED_END,
        ("AIza",),
        "Google API key: AIza + 35 characters of [0-9A-Za-z_-]",
    ),
)
