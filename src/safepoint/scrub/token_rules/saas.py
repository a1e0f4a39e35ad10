"""Messaging and payment services: Slack, Stripe, Twilio and SendGrid."""

from __future__ import annotations

import re

from safepoint.scrub.engine.rule import Rule

from .parts import ASSIGN, DASHED_END, DASHED_START, TOKEN_END, TOKEN_START, prefixed
from .value_checks import looks_random

RULES: tuple[Rule, ...] = (
    prefixed(
        "slack-token",
        DASHED_START + r"(?:xox[abeoprs]|xapp)-[0-9A-Za-z]{1,40}(?:-[0-9A-Za-z]{1,200}){1,6}" + DASHED_END,
        ("xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxe-", "xoxo-", "xapp-"),
        "Slack token: xoxb- bot, xoxp- user, xoxa-/xoxr- workspace/refresh, xoxs-, xoxe- rotating, "
        "xapp- app-level",
        max_length=500,
    ),
    prefixed(
        "slack-webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9]{6,20}/[A-Za-z0-9]{6,20}/[A-Za-z0-9/]{16,120}"
        + TOKEN_END,
        ("hooks.slack.com/",),
        "Slack incoming webhook URL: hooks.slack.com/services/T…/B…/<secret>",
    ),
    prefixed(
        "stripe-key",
        TOKEN_START
        + r"(?:(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{20,247}|whsec_[A-Za-z0-9+/=]{32,100})"
        + TOKEN_END,
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"),
        "Stripe secret key sk_live_/sk_test_, restricted key rk_live_/rk_test_, webhook secret whsec_",
    ),
    prefixed(
        "twilio-api-key",
        TOKEN_START + r"SK[0-9a-f]{32}" + TOKEN_END,
        ("SK",),
        "Twilio API key SID: SK + 32 lowercase hex",
    ),
    Rule(
        name="twilio-auth-token",
        pattern=re.compile(
            r"(?:(?i:twilio)[A-Za-z0-9_.-]{0,24}?(?i:auth[_-]?token|api[_-]?secret|secret|token)"
            + ASSIGN
            + r"|"
            + TOKEN_START
            + r"AC[0-9a-f]{32}:)(?P<secret>[A-Za-z0-9]{32})(?![A-Za-z0-9])"
        ),
        triggers=("twilio", "ac"),
        spellings=("twilio", "Twilio", "TWILIO", "AC"),
        validate=looks_random,
        description="Twilio auth token or API secret (32 characters) after TWILIO_AUTH_TOKEN= or AC<sid>:",
        max_length=140,
    ),
    prefixed(
        "sendgrid-api-key",
        DASHED_START + r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}" + DASHED_END,
        ("SG.",),
        "SendGrid API key: SG. + 22 + . + 43 base64url characters",
    ),
)
