"""Registered secrets: the values a harness holds, found in every encoding.

A harness knows its own credentials (API keys, database passwords). It
registers them here by name; the scrubber then finds each value wherever it
appears — as a whole string, inside text, and in the encodings a harness or a
serializer produces: JSON-escaped (also twice) in the styles JSON libraries
write (``\\/``, ``\\u0026`` for HTML-sensitive or all punctuation, upper- or
lower-case hex, non-ASCII escaped or not), URL-encoded (also twice), HTML
escaped (named, decimal or hex entities), base64 and base64url (at any
alignment, so inside ``Authorization: Basic`` headers too, and across the line
breaks of MIME or PEM wrapping). All variants of all secrets go into one
Aho-Corasick automaton, so the cost of a scan does not grow with the number of
secrets; each value has a fixed number of variants, each a few times its
length, so the automaton's size grows only linearly with the values'. This
module is the registry (:class:`Secrets`) and the markers; the encodings are
:mod:`safepoint.scrub.encodings`, the automaton and the search
:mod:`safepoint.scrub.automata`.

What a match becomes (``reference`` policy):

* a string that *is* the secret → ``{"$secret": "NAME"}``
* a secret inside text → ``[SECRET:NAME]`` (raw) or ``[SECRET:NAME|enc]``
  where ``enc`` names the encoding, so ``restore`` can put back exactly the
  text that was there. A base64 match that is only part of a longer base64
  token (``user:password`` in a Basic header) becomes
  ``[SECRET:NAME|base64-part]``, and one split by line breaks
  ``[SECRET:NAME|base64-wrapped]``; both stay markers on restore: the
  surrounding bits, or where the lines broke, cannot be rebuilt.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping

from safepoint.errors import InvalidArgument, UnknownSecret
from safepoint.forksafe import fork_safe_lock

from .automata import Matcher, Variant, build_automaton, build_prefilter, prefilter_words

MIN_SECRET_LENGTH = 8
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
# Markers are plain ASCII: they survive JSON, URL and log round trips unchanged.
MARKER = re.compile(r"\[SECRET:([A-Za-z0-9_.\-]{1,128})(?:\|([a-z0-9\-]+))?\]")


class Secrets:
    """The secrets a harness holds, by name: what the scrubber must never store.

    >>> secrets = Secrets().add("OPENAI_API_KEY", "sk-example-0123456789")
    >>> secrets.names()
    ['OPENAI_API_KEY']

    Values come from ``add`` (name and value), ``add_env`` (environment
    variable names) or ``add_source`` (a callable, e.g. a vault lookup, called
    at registration and again on ``refresh``). Names appear in stored
    references; values never leave this object except through ``value`` or a
    ``restore`` the caller asks for.
    """

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self._values: dict[str, str] = {}
        self._sources: dict[str, Callable[[], str]] = {}
        # Building an automaton takes a while (a store's first save): a child forked meanwhile
        # gets a fresh lock, not the held one.
        self._lock = fork_safe_lock(self)
        self._automaton: Matcher[Variant] | None = None
        self._prefilter: Matcher[bool] | None = None
        self.version = 0  # bumped on every change: caches of scrub results check it
        for name, value in (values or {}).items():
            self.add(name, value)

    def __repr__(self) -> str:  # never the values
        return f"Secrets({self.names()!r})"

    def add(self, name: str, value: str) -> Secrets:
        """Register ``value`` under ``name``; returns self so calls chain."""
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise InvalidArgument(f"secret name {name!r} must be 1-128 letters, digits, '_', '.' or '-'")
        if not isinstance(value, str):
            raise InvalidArgument(f"secret {name!r} must be a str, not {type(value).__name__}")
        if len(value) < MIN_SECRET_LENGTH:
            raise InvalidArgument(
                f"secret {name!r} is {len(value)} characters; at least {MIN_SECRET_LENGTH} are needed "
                "to find it without redacting ordinary text"
            )
        try:  # its UTF-8 bytes are what base64 and URL encodings are made of
            value.encode()
        except UnicodeEncodeError:
            raise InvalidArgument(
                f"secret {name!r} holds a lone surrogate, which UTF-8 cannot hold"
            ) from None
        with self._lock:
            self._values[name] = value
            self._automaton = self._prefilter = None
            self.version += 1
        return self

    def add_env(self, *names: str, environ: Mapping[str, str] | None = None) -> Secrets:
        """Register environment variables by name (their current values)."""
        env = os.environ if environ is None else environ
        for name in names:
            if name not in env:
                raise InvalidArgument(f"environment variable {name!r} is not set")
            self.add(name, env[name])
        return self

    def add_source(self, name: str, fetch: Callable[[], str]) -> Secrets:
        """Register a secret fetched by ``fetch()`` (now, and again on ``refresh``)."""
        self._sources[name] = fetch
        return self.add(name, fetch())

    def refresh(self) -> None:
        """Fetch every ``add_source`` secret again (after a rotation)."""
        for name, fetch in self._sources.items():
            self.add(name, fetch())

    def names(self) -> list[str]:
        return sorted(self._values)

    def value(self, name: str) -> str:
        """The value registered under ``name``; ``UnknownSecret`` if none."""
        try:
            return self._values[name]
        except KeyError:
            raise UnknownSecret(name) from None

    def __len__(self) -> int:
        return len(self._values)

    def automaton(self) -> Matcher[Variant] | None:
        """The Aho-Corasick automaton over every variant of every value (cached)."""
        if not self._values:
            return None
        with self._lock:
            if self._automaton is None:
                self._automaton = build_automaton(self._values)
            return self._automaton

    def prefilter(self) -> Matcher[bool] | None:
        """An automaton for the canonical JSON text of a whole field: every variant
        as it appears once more JSON-escaped there (the same text when the
        variant holds no quote, backslash or control character), and the
        base64 variants across line breaks too."""
        if not self._values:  # nothing registered: nothing to build, on every save
            return None
        with self._lock:
            if self._prefilter is None:
                self._prefilter = build_prefilter(self._values)
            return self._prefilter

    def look_words(self) -> tuple[int, list[str]]:
        """What :meth:`prefilter` looks for (as a list, for a prefilter that runs them in one pass
        with other words) and the registry's version those words are of."""
        with self._lock:
            return self.version, prefilter_words(self._values)


def marker(name: str, encoding: str) -> str:
    return f"[SECRET:{name}]" if encoding == "raw" else f"[SECRET:{name}|{encoding}]"
