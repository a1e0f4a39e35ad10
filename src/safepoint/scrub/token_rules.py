"""The secret rule table: well-known credential formats, as their providers document them.

Each rule names the format it targets in ``description``. Prefixed tokens are
found by their prefix (exact case: the case is part of the format); secrets
without a prefix (an AWS secret key, a password) only by their context — a key
name such as ``aws_secret_access_key`` or ``password`` followed by ``=``/``:``.
Values that a rule's shape admits but that are not credentials — placeholders
(``changeme``, ``${TOKEN}``, ``<your-key>``, ``********``), code
(``os.environ["X"]``), identifiers, numbers, paths, URLs — are turned away by
the value checks of :mod:`safepoint.scrub.rules` (entropy, character classes).

Order matters only on a tie: on overlapping matches the longer wins, then the
rule listed first, so specific formats come before the generic ones.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from urllib.parse import unquote

from safepoint.scrub.rules import (
    PEM_RULE_NAME,
    Rule,
    case_variants,
    has_mixed_case,
    is_placeholder,
    looks_like_secret_value,
    looks_random,
)

# A token does not continue a word on either side; an escaped \n, \r or \t before it (text inside a
# JSON string) counts as a line break, not as the letter n.
_ESCAPE = r"(?<=\\[nrt])"
_L = r"(?:(?<![A-Za-z0-9_])|" + _ESCAPE + ")"
_R = r"(?![A-Za-z0-9_])"
_LD = r"(?:(?<![A-Za-z0-9_-])|" + _ESCAPE + ")"  # … nor a dashed name, for formats whose alphabet has "-"
_RD = r"(?![A-Za-z0-9_-])"
# key="value", key: value, "key": "value", key => value, key := value, \"key\": \"value\" (JSON in
# JSON), \\\"key\\\": \\\"value\\\" (and once more)
_ASSIGN_TO_VALUE = (
    r"""(?:\\{0,3}["'])?(?:[ \t]*:[ \t]*(?:str|bytes|SecretStr))?[ \t]{0,4}(?::=|=>|==|[:=])[ \t]{0,4}"""
    r"""\\{0,3}"""
)
_ASSIGN = _ASSIGN_TO_VALUE + r"""["'`]?"""
# A CSV field on one line: quoted ("" inside for a quote) or bare (no comma or quote).
_CSV_FIELD = r'(?:"(?:[^"\r\n\\]|""){1,128}"|[^,"\r\n\\]{1,128})'


def _prefixed(
    name: str,
    regex: str,
    prefixes: tuple[str, ...],
    description: str,
    *,
    max_length: int | None = 256,
    strict: bool = False,
) -> Rule:
    """A token found by its documented, case-sensitive prefix."""
    validate = _random_with_classes if strict else looks_random
    return Rule(
        name=name,
        pattern=re.compile(regex),
        triggers=tuple(p.lower() for p in prefixes),
        validate=validate,
        description=description,
        spellings=prefixes,
        max_length=max_length,
    )


def _random_with_classes(value: str) -> bool:
    """For weak prefixes (``sk-``, ``hf_``, ``npm_``): a generated key mixes cases."""
    return looks_random(value) and has_mixed_case(value)


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


def _is_basic_credentials(value: str) -> bool:
    """A ``Basic`` header value: base64 of ``user:password``."""
    try:
        decoded = base64.b64decode(value, validate=True).decode()
    except (ValueError, binascii.Error):
        return False
    return ":" in decoded and decoded.isprintable()


def _header_value(value: str) -> bool:
    return not is_placeholder(value) and (_is_basic_credentials(value) or looks_like_secret_value(value))


def _url_password(value: str) -> bool:
    value = unquote(value)  # the same judgement for a password inside a URL-encoded URL
    low = value.lower()
    return not is_placeholder(value) and low not in _URL_PLACEHOLDERS and not value.startswith(("$", "{"))


# Where a URL's scheme ends: as written, JSON-escaped by a serializer that escapes "/" (:\/\/) and
# encoded into JSON up to three times more (one to four backslashes), and URL-encoded (either hex case).
_URL_SCHEME_ENDS = (
    "://",
    *(f":{e}/{e}/" for e in ("\\", "\\" * 2, "\\" * 3, "\\" * 4)),
    "%3A%2F%2F",
    "%3a%2f%2f",
)
# A userinfo character inside a URL-encoded URL: unreserved or sub-delims (not "&" or "=", which end a
# query parameter), or a %XX escape other than of "@", "/", "?", "#", space, quote (and ":" in the
# user name, where it ends it).
_ENC_CHAR = r"(?:[A-Za-z0-9._~!$'()*+,;-]|%(?!40|2[Ff]|3[Ff]|23|20|22{more})[0-9A-Fa-f]{{2}})"
_URL_PLACEHOLDERS = frozenset(
    {"password", "passwd", "pass", "pwd", "pw", "secret", "p", "x", "changeme", "token"}
)

# Key names that hold no secret although they contain a secret word. Before "token": the tokens of
# pagination (nextPageToken), idempotency and concurrency (ClientToken, ChangeToken, LockToken) and
# public ones (VerificationToken). Before any word: ":" (an ARN's ":secret:", a type's "::ApiKey").
# After it: plurals and tokenizers, and ids, names, counts, urls, prefixes of the thing.
_NOT_BEFORE_TOKEN = "".join(  # checked after "token" is read, so other words skip them
    f"(?<!{word}token)(?<!{word}[_.-]token)"
    for word in (
        *(
            "page",
            "next",
            "continuation",
            "pagination",
            "cursor",
            "sync",
            "resume",
            "delta",
            "skip",
            "marker",
        ),
        *("change", "lock", "client", "request", "idempotency", "lifecycle", "action", "purchase", "export"),
        *(
            "import",
            "update",
            "policy",
            "copy",
            "product",
            "input",
            "output",
            "verification",
            "public",
            "publickey",
        ),
    )
)
_NOT_AFTER_WORD = (
    r"(?!(?i:s(?![a-z])|iz[a-z]*|s?[_.-]?(?:ids?|arns?|names?|urls?|uris?|paths?|files?|dirs?|types?|"
    r"counts?|endpoints?|versions?|len|lengths?|limits?|ttl|expir[a-z]*|usage|used|budget|polic(?:y|ies)|"
    r"prompt|hint|fields?|labels?|kinds?|providers?|sources?|refs?|reset|stores?|manager|helper|formats?|"
    r"hash(?:es|ed)?|rotation|valid[a-z]*|required|strength|prefix(?:es)?|suffix(?:es)?|patterns?|regex|"
    r"headers?|param(?:eter)?s?|scheme|templates?|mask|location)(?![a-z])))"
)
_SECRET_KEY_WORD = (
    r"(?<!:)(?i:password|passwd|passphrase|pwd|secret|token"
    + _NOT_BEFORE_TOKEN
    + r"|credentials?|api[_-]?key|access[_-]?key|private[_-]?key)"
)
# The value: quoted (anything but whitespace, quotes and backslash) or bare (no code punctuation: in
# os.environ["X"], f"{x}", user.password and ${X} the bare value is too short or absent). A value is
# taken whole, however long, up to the first character it cannot hold — a quoted one must end at its
# quote, and a bare one not at "(", "[" or "{": that is code (b64decode(x), tokens[0]), not a value.
# Possessive runs, and where the value is refused the third branch reads it anyway (no "secret"
# group): the rule covers what it refused (covers_refused), so a dense "password=password=…" or a
# megabyte-long value costs one read, not one per trigger inside it.
_QUOTED_CHARS = r"""[^\s"'`\\]"""
_BARE_CHARS = r"""[^\s"'`\\,;&<>()\[\]{}.]"""
_VALUE = (
    rf"""(?P<q>["'`])?(?:(?P<secret>(?(q){_QUOTED_CHARS}{{8,}}+|{_BARE_CHARS}{{8,}}+))"""
    rf"""(?(q)(?=\\{{0,3}}(?P=q))|(?![(\[{{]))"""
    rf"""|(?(q){_QUOTED_CHARS}*+|{_BARE_CHARS}*+))"""
)
SECRET_RULES: tuple[Rule, ...] = (
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
            _LD
            + r"e(?:yJ|yA|wo|w0|wk)[A-Za-z0-9_-]{8,4000}\.[A-Za-z0-9_-]{2,12000}\.[A-Za-z0-9_-]{0,2000}"
            + _RD
        ),
        triggers=tuple(p.lower() for p in _JWT_PREFIXES),
        spellings=_JWT_PREFIXES,
        validate=_jwt_header_has_alg,
        description='JSON Web Token (RFC 7519): three base64url parts, the header JSON with "alg" '
        "(compact, or with spaces or line breaks after its brace)",
        max_length=18100,
    ),
    _prefixed(
        "aws-access-key-id",
        _L + r"(?:AKIA|ASIA)[A-Z2-7]{16}(?![A-Za-z0-9])",
        ("AKIA", "ASIA"),
        "AWS access key id: AKIA (long-term) or ASIA (temporary) + 16 base32 characters",
    ),
    Rule(
        name="aws-secret-access-key",
        pattern=re.compile(
            # anchored at "secret": secret_access_key / SecretAccessKey, or aws_secret(_key)
            r"(?:(?i:secret[_-]?access[_-]?key|(?:(?<=aws)|(?<=aws[_-]))secret(?:[_-]?key)?)"
            + _ASSIGN
            # or at the key id, in the credentials CSV the AWS console downloads:
            # "Access key ID,Secret access key" rows, "User name,Password,…" rows
            + r"|(?:(?<![A-Za-z0-9])|"
            + _ESCAPE
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
    _prefixed(
        "github-token",
        _L + r"gh[pousr]_[A-Za-z0-9]{36,251}" + _R,
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        "GitHub token: ghp_ classic PAT, gho_ OAuth, ghu_ user-to-server, ghs_ server-to-server, "
        "ghr_ refresh + base62",
    ),
    _prefixed(
        "github-fine-grained-token",
        _L + r"github_pat_[A-Za-z0-9_]{70,240}" + _R,
        ("github_pat_",),
        "GitHub fine-grained personal access token: github_pat_ + 22 + _ + 59 base62 characters",
    ),
    _prefixed(
        "gitlab-token",
        _LD
        + r"(?:gl(?:pat|oas|dt|rt|rtr|cbt|ptt|ft|imt|agent|soat|ffct|wt)-[A-Za-z0-9_-]{20,200}"
        + r"(?:\.[A-Za-z0-9_-]{2,40}){0,3}|GR1348941[A-Za-z0-9_-]{20,60})"
        + _RD,
        (
            *(
                f"gl{p}-"
                for p in ("pat", "oas", "dt", "rt", "rtr", "cbt", "ptt", "ft", "imt", "agent", "soat")
            ),
            *("glffct-", "glwt-", "GR1348941"),
        ),
        "GitLab token: glpat- personal, gloas- OAuth secret, gldt- deploy, glrt- runner, glcbt- job, "
        "glptt- trigger, glft- feed, … and GR1348941 runner registration",
        max_length=400,
    ),
    _prefixed(
        "anthropic-api-key",
        _LD + r"sk-ant-(?:api|admin|oat|ort|sid)\d{2}-[A-Za-z0-9_-]{32,250}" + _RD,
        ("sk-ant-",),
        "Anthropic key: sk-ant-api03- (API) or sk-ant-admin01- (Admin) + base64url",
        max_length=300,
    ),
    _prefixed(
        "openai-api-key",
        _LD + r"sk-(?!ant-)(?:(?:proj|svcacct|admin|None)-)?[A-Za-z0-9_-]{20,250}" + _RD,
        ("sk-",),
        "OpenAI API key: sk- (legacy), sk-proj- (project), sk-svcacct- (service account), sk-admin-",
        max_length=300,
        strict=True,
    ),
    _prefixed(
        "google-api-key",
        _LD + r"AIza[0-9A-Za-z_-]{35}" + _RD,
        ("AIza",),
        "Google API key: AIza + 35 characters of [0-9A-Za-z_-]",
    ),
    _prefixed(
        "slack-token",
        _LD + r"(?:xox[abeoprs]|xapp)-[0-9A-Za-z]{1,40}(?:-[0-9A-Za-z]{1,200}){1,6}" + _RD,
        ("xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxe-", "xoxo-", "xapp-"),
        "Slack token: xoxb- bot, xoxp- user, xoxa-/xoxr- workspace/refresh, xoxs-, xoxe- rotating, "
        "xapp- app-level",
        max_length=500,
    ),
    _prefixed(
        "slack-webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9]{6,20}/[A-Za-z0-9]{6,20}/[A-Za-z0-9/]{16,120}"
        + _R,
        ("hooks.slack.com/",),
        "Slack incoming webhook URL: hooks.slack.com/services/T…/B…/<secret>",
    ),
    _prefixed(
        "stripe-key",
        _L + r"(?:(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{20,247}|whsec_[A-Za-z0-9+/=]{32,100})" + _R,
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"),
        "Stripe secret key sk_live_/sk_test_, restricted key rk_live_/rk_test_, webhook secret whsec_",
    ),
    _prefixed(
        "twilio-api-key",
        _L + r"SK[0-9a-f]{32}" + _R,
        ("SK",),
        "Twilio API key SID: SK + 32 lowercase hex",
    ),
    Rule(
        name="twilio-auth-token",
        pattern=re.compile(
            r"(?:(?i:twilio)[A-Za-z0-9_.-]{0,24}?(?i:auth[_-]?token|api[_-]?secret|secret|token)"
            + _ASSIGN
            + r"|"
            + _L
            + r"AC[0-9a-f]{32}:)(?P<secret>[A-Za-z0-9]{32})(?![A-Za-z0-9])"
        ),
        triggers=("twilio", "ac"),
        spellings=("twilio", "Twilio", "TWILIO", "AC"),
        validate=looks_random,
        description="Twilio auth token or API secret (32 characters) after TWILIO_AUTH_TOKEN= or AC<sid>:",
        max_length=140,
    ),
    _prefixed(
        "sendgrid-api-key",
        _LD + r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}" + _RD,
        ("SG.",),
        "SendGrid API key: SG. + 22 + . + 43 base64url characters",
    ),
    _prefixed(
        "npm-token",
        _L + r"npm_[A-Za-z0-9]{36}" + _R,
        ("npm_",),
        "npm access token: npm_ + 36 base62 characters",
        strict=True,
    ),
    _prefixed(
        "pypi-token",
        # (a word boundary before it: a prefix repeated inside one run fails at once, not after a read)
        _LD + r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,}+" + _RD,
        ("pypi-AgEIcHlwaS5vcmc", "pypi-AgENdGVzdC5weXBpLm9yZw"),
        "PyPI API token: pypi- + a macaroon whose location is pypi.org (or test.pypi.org), however long",
        max_length=None,
    ),
    _prefixed(
        "huggingface-token",
        _L + r"(?:hf|api_org)_[A-Za-z0-9]{30,40}" + _R,
        ("hf_", "api_org_"),
        "Hugging Face user access token hf_ (or org token api_org_) + 34 letters",
        strict=True,
    ),
    Rule(
        name="url-password",
        pattern=re.compile(
            # scheme://, JSON-escaped (:\/\/, :\\/\\/, …: one to four backslashes), or the URL URL-encoded
            r"""(?:(?P<enc>%3[Aa]%2[Ff]%2[Ff])"""
            + _ENC_CHAR.format(more="|3[Aa]")
            + r"""{0,128}%3[Aa]|:(?://|(?P<esc>\\{1,4})/(?P=esc)/)[^\s:@/?#\[\]"'<>\\]{0,128}:)"""
            + r"""(?P<secret>(?(enc)"""
            + _ENC_CHAR.format(more="")
            + r"""{1,256}|[^\s@/?#"'<>\\]{1,256}))(?(enc)%40|@)(?=[A-Za-z0-9\[_-])"""
        ),
        triggers=tuple(s.lower() for s in _URL_SCHEME_ENDS),
        spellings=_URL_SCHEME_ENDS,
        validate=_url_password,
        description="the password in a URL's userinfo: scheme://user:PASSWORD@host, also JSON-escaped "
        "(:\\/\\/) or inside a URL-encoded URL (%3A%2F%2Fuser%3APASSWORD%40host)",
        max_length=420,
    ),
    Rule(
        name="authorization-header",
        pattern=re.compile(
            r"(?:(?<![A-Za-z0-9])|"
            + _ESCAPE
            + r")(?i:authorization)(?:\\?[\"'])?[ \t]{0,4}[:=][ \t]{0,4}(?:\\?[\"'])?"
            r"(?:(?i:bearer|basic|token|bot|apikey|api-key|sso-key)[ \t]+)?"
            r"(?P<secret>[A-Za-z0-9._~+/-]{8,4096}=*)(?![A-Za-z0-9._~+/=-])"
        ),
        triggers=("authorization",),
        validate=_header_value,
        description="Authorization: Bearer <token> / Basic <base64> (HTTP header or JSON field)",
        max_length=4200,
    ),
    Rule(
        name="bearer-token",
        pattern=re.compile(
            r"(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{16,4096}=*)(?![A-Za-z0-9._~+/=-])"
        ),
        triggers=("bearer",),
        validate=looks_like_secret_value,
        description="a bearer token (RFC 6750) written as 'Bearer <token>' anywhere",
        max_length=4200,
    ),
    Rule(
        name="credential-assignment",
        pattern=re.compile(
            # The key's tail runs up to the assignment (possessive: it cannot hold one), looked at first
            # so that a key word not followed by an assignment fails before the word checks run.
            _SECRET_KEY_WORD
            + r"(?=[A-Za-z0-9_.-]{0,30}+"
            + _ASSIGN_TO_VALUE
            + ")"
            + _NOT_AFTER_WORD
            + r"[A-Za-z0-9_.-]{0,30}+"
            + _ASSIGN_TO_VALUE
            + _VALUE
        ),
        triggers=(
            "password",
            "passwd",
            "passphrase",
            "pwd",
            "secret",
            "token",
            "credential",
            "api_key",
            "api-key",
            "apikey",
            "access_key",
            "access-key",
            "private_key",
            "private-key",
        ),
        validate=looks_like_secret_value,
        description="a high-entropy value assigned to password/passwd/secret/token/api_key/access_key/… "
        "(env, YAML, JSON, code), however long",
        max_length=None,
        covers_refused=True,
    ),
)
