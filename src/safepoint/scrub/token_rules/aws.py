"""Amazon Web Services: access key ids, secret access keys, and the console's credentials CSV."""

from __future__ import annotations

import re

from safepoint.scrub.engine.rule import Rule, case_variants

from .parts import ASSIGN, ESCAPED_BREAK, TOKEN_START, prefixed
from .value_checks import looks_random

# A CSV field on one line: quoted ("" inside for a quote) or bare (no comma or quote).
_CSV_FIELD = r'(?:"(?:[^"\r\n\\]|""){1,128}"|[^,"\r\n\\]{1,128})'

RULES: tuple[Rule, ...] = (
    prefixed(
        "aws-access-key-id",
        TOKEN_START + r"(?:AKIA|ASIA)[A-Z2-7]{16}(?![A-Za-z0-9])",
        ("AKIA", "ASIA"),
        "AWS access key id: AKIA (long-term) or ASIA (temporary) + 16 base32 characters",
    ),
    Rule(
        name="aws-secret-access-key",
        pattern=re.compile(
            # anchored at "secret": secret_access_key / SecretAccessKey, or aws_secret(_key)
            r"(?:(?i:secret[_-]?access[_-]?key|(?:(?<=aws)|(?<=aws[_-]))secret(?:[_-]?key)?)"
            + ASSIGN
            # or at the key id, in the credentials CSV the AWS console downloads:
            # "Access key ID,Secret access key" rows, "User name,Password,…" rows
            + r"|(?:(?<![A-Za-z0-9])|"
            + ESCAPED_BREAK
            + r')(?:AKIA|ASIA)[A-Z2-7]{16}"?,"?)'
            + r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        triggers=("secret", "akia", "asia"),
        spellings=(*sorted(case_variants("secret")), "AKIA", "ASIA"),
        validate=looks_random,
        description="AWS secret access key: 40 base64 characters after aws_secret_access_key/"
        "SecretAccessKey, or after the access key id in a credentials CSV row",
        max_length=120,
    ),
    Rule(
        name="aws-console-password",
        pattern=re.compile(
            # a CSV row from its line start (or an escaped \n): user name, PASSWORD, key id, secret key
            r"(?:(?<![^\n])|(?<=\\n))"
            + _CSV_FIELD
            + ",(?P<secret>"
            + _CSV_FIELD
            + r'),"?(?:AKIA|ASIA)[A-Z2-7]{16}"?,"?[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])'
        ),
        triggers=("akia", "asia"),
        spellings=("AKIA", "ASIA"),
        validate=lambda value: value.strip('"') != "",
        description="the Password column of the AWS console's credentials CSV "
        "(User name,Password,Access key ID,Secret access key,Console login link)",
        reach_before=2 * 131 + 2,
        max_length=2 * 131 + 2 + 66,
    ),
)
