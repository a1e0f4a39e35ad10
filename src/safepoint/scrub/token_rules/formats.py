"""Standard formats any issuer uses: PEM private keys and JSON Web Tokens."""

from __future__ import annotations

import base64
import binascii
import json
import re

from safepoint.scrub.engine.rule import Rule
from safepoint.scrub.pem_lines import PEM_RULE_NAME

from .parts import DASHED_END, DASHED_START

# The base64url of a JWT header's first two bytes: '{"' (compact JSON), '{ ', '{\n', '{\r', '{\t'
# (JSON written with spaces or indented, as some libraries do).
_JWT_PREFIXES = ("eyJ", "eyA", "ewo", "ew0", "ewk")


def _jwt_header_has_alg(token: str) -> bool:
    header = token.split(".", 1)[0]
    try:
        decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (ValueError, binascii.Error):
        return False
    return isinstance(decoded, dict) and "alg" in decoded


def _pem_has_key_material(block: str) -> bool:
    return re.search(r"[A-Za-z0-9+/]{32}", block) is not None


RULES: tuple[Rule, ...] = (
    Rule(
        name=PEM_RULE_NAME,
        pattern=re.compile(
            r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:"
            # (the body never runs into another BEGIN, so a flood of headers costs linear time)
            r"(?:(?!-----BEGIN)[A-Za-z0-9+/=\s:,.\\-]){0,20000}?"
            r"-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
            # no END (a truncated key): its header lines and base64 lines
            r"|(?:(?:\\[rn]|\s)+(?:[A-Za-z-]+: [^\n\\]{0,100}|[A-Za-z0-9+/=]{16,}))+)"
        ),
        triggers=("-----begin",),
        spellings=("-----BEGIN",),
        validate=_pem_has_key_material,
        description="PEM private key block (PKCS#1 RSA, SEC1 EC, PKCS#8, ENCRYPTED, OPENSSH, PGP), "
        "with real newlines or JSON-escaped \\n",
        max_length=21000,
    ),
    Rule(
        name="jwt",
        pattern=re.compile(
            DASHED_START
            + r"e(?:yJ|yA|wo|w0|wk)[A-Za-z0-9_-]{8,4000}\.[A-Za-z0-9_-]{2,12000}\.[A-Za-z0-9_-]{0,2000}"
            + DASHED_END
        ),
        triggers=tuple(p.lower() for p in _JWT_PREFIXES),
        spellings=_JWT_PREFIXES,
        validate=_jwt_header_has_alg,
        description='JSON Web Token (RFC 7519): three base64url parts, the header JSON with "alg" '
        "(compact, or with spaces or line breaks after its brace)",
        max_length=18100,
    ),
)
