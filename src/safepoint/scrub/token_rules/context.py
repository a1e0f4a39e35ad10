"""Secrets without a prefix, found by their context: a URL's password, HTTP authorization
headers, bearer tokens, and values assigned to secret-sounding keys.

A key name such as ``password`` or ``api_key`` followed by ``=``/``:`` is the
trigger; the value checks turn away placeholders, code, identifiers, numbers,
paths and URLs.
"""

from __future__ import annotations

import base64
import binascii
import re
from urllib.parse import unquote

from safepoint.scrub.engine.rule import Rule

from .parts import ASSIGN_TO_VALUE, ESCAPED_BREAK
from .value_checks import is_placeholder, looks_like_secret_value


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

RULES: tuple[Rule, ...] = (
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
            + ESCAPED_BREAK
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
            + ASSIGN_TO_VALUE
            + ")"
            + _NOT_AFTER_WORD
            + r"[A-Za-z0-9_.-]{0,30}+"
            + ASSIGN_TO_VALUE
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
