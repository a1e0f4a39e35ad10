"""Opt-in PII rules — email, phone, card, iban, ssn — with the checksums that keep them honest.

None of these is on by default: a store redacts a PII kind only when asked
(``pii=("email",)``). Numbers are checked, not just shaped: a card number must
pass Luhn and start with an issuer's prefix, an IBAN must have its country's
length and pass mod-97, an SSN must lie outside the never-issued ranges, and
a phone number must carry a country code or a national layout — so dates,
versions, IP addresses, timestamps and order numbers stay as they are.

Emails are found from their ``@`` (an Aho-Corasick trigger); the numeric kinds
have no literal to trigger on, so their regexes run over the whole text. Each
such pattern starts with a plain character class so that the regex engine can
skip to candidate characters in C.
"""

from __future__ import annotations

import re

from .engine.rule import Rule

# The kinds a store may ask for (``pii=``), each the ``kind`` of one or more rules below.
PII_KINDS: tuple[str, ...] = ("email", "phone", "card", "iban", "ssn")


def luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) check of ISO/IEC 7812 over a string of digits."""
    if not digits.isdigit():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


# Issuer prefixes (IIN ranges) of the card networks, with the lengths they issue.
_IIN: tuple[tuple[int, int, frozenset[int]], ...] = (
    (4, 4, frozenset({13, 16, 19})),  # Visa
    (51, 55, frozenset({16})),  # Mastercard
    (2221, 2720, frozenset({16})),  # Mastercard 2-series
    (34, 34, frozenset({15})),  # American Express
    (37, 37, frozenset({15})),
    (300, 305, frozenset(range(14, 20))),  # Diners Club
    (36, 36, frozenset(range(14, 20))),
    (38, 39, frozenset(range(16, 20))),
    (6011, 6011, frozenset(range(16, 20))),  # Discover
    (644, 649, frozenset(range(16, 20))),
    (65, 65, frozenset(range(16, 20))),
    (3528, 3589, frozenset(range(16, 20))),  # JCB
    (62, 62, frozenset(range(16, 20))),  # UnionPay
    (5018, 5018, frozenset(range(13, 20))),  # Maestro
    (5020, 5020, frozenset(range(13, 20))),
    (5038, 5038, frozenset(range(13, 20))),
    (6304, 6304, frozenset(range(13, 20))),
    (6759, 6759, frozenset(range(13, 20))),
    (6761, 6763, frozenset(range(13, 20))),
)
_CARD_GROUPS = frozenset({(4, 4, 4, 4), (4, 4, 4, 4, 3), (4, 4, 4, 4, 2), (4, 4, 4, 1), (4, 6, 5), (4, 6, 4)})


def card_valid(value: str) -> bool:
    """A payment card number: a known issuer prefix and length, Luhn, and a printed grouping."""
    for sep in (" ", "-"):
        if sep in value:
            if len(set(value) & {" ", "-"}) > 1:
                return False
            groups = tuple(len(g) for g in value.split(sep))
            if groups not in _CARD_GROUPS:
                return False
    digits = value.replace(" ", "").replace("-", "")
    if not 13 <= len(digits) <= 19 or len(set(digits)) < 2:
        return False
    if digits == value and len(digits) not in (15, 16):
        return False  # an unbroken run of another length is far more often an id or a seed than a card
    for low, high, lengths in _IIN:
        width = len(str(low))
        if low <= int(digits[:width]) <= high and len(digits) in lengths:
            return luhn_valid(digits)
    return False


# IBAN lengths by country, from the SWIFT IBAN registry.
IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27,
    "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25,
    "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18,
    "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33,
    "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip


def iban_valid(value: str) -> bool:
    """An IBAN (ISO 13616): its country's length and check digits that make mod 97 equal 1."""
    iban = value.replace(" ", "").upper()
    if IBAN_LENGTHS.get(iban[:2]) != len(iban) or not iban[2:4].isdigit() or not iban.isalnum():
        return False
    rearranged = iban[4:] + iban[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


def _phone_valid(value: str) -> bool:
    digits = sum(c.isdigit() for c in value)
    if value.count(".") == 1 and not any(c in value for c in " -()"):
        return False  # +1.4142135623731 is a number, not a phone
    if value.startswith("+"):  # E.164 allows 15 digits; written without spaces, ask for 10 or more
        return (8 if any(not c.isdigit() for c in value[1:]) else 10) <= digits <= 15
    if value.startswith("0"):  # trunk-0 national numbers have 10 or 11 digits (and SSNs 9)
        return 10 <= digits <= 12
    return 10 <= digits <= 11  # NANP, with or without the leading 1


# A candidate is not part of a longer word, number, path, version, time or range, nor one group of a
# table of space-separated numbers; an escaped \n before it (JSON) is a line break.
_NOT_AFTER_CHAR = r"(?:(?<![\w+/.,#-].)(?<!\d .)|(?<=\\[nrt].))"
_NOT_BEFORE_CHAR = r"(?![\w/@-]|[.:,]\d| \d)"

# Table order breaks ties: the loosest layout, phone, comes last (an SSN is not a phone number).
PII_RULES: tuple[Rule, ...] = (
    Rule(
        name="email",
        pattern=re.compile(
            # The lookarounds let most start positions of the window fail at once, even in a run of "@".
            r"(?<![A-Za-z0-9._%+@-])(?=[A-Za-z0-9._%+-]{1,64}@)[A-Za-z0-9](?:[A-Za-z0-9._%+-]{0,62}[A-Za-z0-9_%+-])?"
            r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![A-Za-z0-9-]|\.[A-Za-z0-9])"
        ),
        triggers=("@",),
        spellings=("@",),
        kind="email",
        description="email address (RFC 5322 dot-atom local part @ a dotted domain)",
        reach_before=64,
        max_length=320,  # 64 + "@" + 255
    ),
    Rule(
        name="card",
        pattern=re.compile(r"[2-6]" + _NOT_AFTER_CHAR + r"(?:[ -]?\d){11,18}" + _NOT_BEFORE_CHAR),
        triggers=(),
        kind="card",
        validate=card_valid,
        description="payment card number: 12 to 19 digits, optional spaces/dashes, issuer prefix, Luhn",
    ),
    Rule(
        name="iban",
        pattern=re.compile(
            r"[A-Z](?<![A-Za-z0-9].)[A-Z]\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])"
        ),
        triggers=(),
        kind="iban",
        validate=iban_valid,
        description="IBAN: country code, 2 check digits, BBAN; with or without groups of 4; mod-97",
    ),
    Rule(
        name="ssn",
        pattern=re.compile(r"[0-8](?<![\w-].)\d{2}-(?!00)\d{2}-(?!0000)\d{4}(?![\w-])"),
        triggers=(),
        kind="ssn",
        validate=lambda v: not v.startswith(("000", "666")),
        description="US Social Security number AAA-GG-SSSS outside 000/666/9xx, 00 and 0000",
    ),
    Rule(
        name="phone",
        pattern=re.compile(
            # The first character is a plain class (the engine skips to it in C); each layout then
            # looks back at it.
            r"[+(0-9]" + _NOT_AFTER_CHAR + r"(?:"
            # +CC …: E.164 / international. Possessive groups: a long run of digits is read once, not
            # split every way into six groups of one to five (which cost seconds per MB of digits).
            r"(?<=\+)[1-9]\d{0,2}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d{1,5}+){1,6}+"
            r"|(?<=\()[2-9]\d{2}\)[ .-]?[2-9]\d{2}[ .-]\d{4}"  # (555) 123-4567
            r"|(?<=[2-9])\d{2}([ .-])[2-9]\d{2}\1\d{4}"  # 555-123-4567, 555.123.4567, 555 123 4567
            r"|(?<=1)([ .-])[2-9]\d{2}\2[2-9]\d{2}\2\d{4}"  # 1-800-555-0199
            r"|(?<=0)\d{1,4}(?:([ -])\d{2,4})(?:\3\d{2,4}){1,3}"  # 020 7946 0958, 06 12 34 56 78
            r")" + _NOT_BEFORE_CHAR
        ),
        triggers=(),
        kind="phone",
        validate=_phone_valid,
        description="phone number: E.164 (+CC …), NANP layouts, or trunk-0 national groups",
    ),
)
