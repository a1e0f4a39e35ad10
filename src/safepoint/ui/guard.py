"""Who may talk to the inspector: the ASGI middleware in front of every page.

Checked on every request, before any page sees it:

* **Host.** The ``Host`` header must name the address the server is bound
  to (or a name given with ``--allow-host``). A web page the operator
  visits could otherwise point a name it controls at 127.0.0.1 (DNS
  rebinding) and read conversations with the browser's help.
* **Token.** Bound to anything but loopback, every request needs the
  token: given once as ``?token=``, traded for an HttpOnly, SameSite=Strict
  cookie and a redirect to the same page without it, so it does not linger
  in the address bar, history or referrers.
* **Writes.** A POST (the actions, verify) must carry the page's form token
  and come from this origin (``Origin``, when the browser sends one): a
  cross-site form cannot act.

Every response says what the browser may do with it: scripts, styles and
images from this server only (no inline script runs, whatever a stored
string holds), no framing, no referrer to other sites, no sniffing. No CORS header is ever
sent.
"""

from __future__ import annotations

import hmac
import re
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "safepoint_ui"
HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        b"form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # no referrer to other sites; our own forms keep their Origin
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


class Guard:
    """The checks above, around ``app``; ``form_token`` is what a page puts in its forms."""

    def __init__(
        self, app: ASGIApp, *, host: str, port: int, token: str | None, allowed_hosts: tuple[str, ...] = ()
    ) -> None:
        self.app = app
        self.token = token
        names = {host, *allowed_hosts} | (LOOPBACK if host in LOOPBACK else set())
        self.hosts = frozenset(f"[{n}]:{port}" if ":" in n else f"{n}:{port}" for n in names) | frozenset(
            names if port == 80 else ()
        )
        self.origins = frozenset(f"http://{h}" for h in self.hosts)
        self.form_token = secrets.token_urlsafe(24)  # per process: forms of an older server go stale
        # Cookies ignore ports: one name for every inspector on a host would let
        # each sign-in overwrite the others' token. The port tells them apart.
        self.cookie = f"{COOKIE}_{port}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if headers.get("host", "").lower() not in self.hosts:
            await _plain(send, 421, "this inspector answers only to the address it is bound to")
            return
        if self.token is not None and not self._signed_in(headers):
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            given = query.pop("token", None)
            if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
                await _plain(send, 401, "this inspector needs its token: open the address it printed")
                return
            raw = scope.get("raw_path") or scope["path"].encode("utf-8")  # as sent: still encoded
            # (Some servers' raw_path carries the query string too, which the ASGI spec leaves out.)
            target = same_site(raw.decode("latin-1").partition("?")[0]) + (
                f"?{urlencode(query)}" if query else ""
            )
            cookie = f"{self.cookie}={self.token}; HttpOnly; SameSite=Strict; Path=/"
            await _redirect(send, target, cookie)
            return
        if scope["method"] not in ("GET", "HEAD"):
            origin = headers.get("origin")
            if origin is not None and origin.lower() not in self.origins:
                await _plain(send, 403, "a request from another site was refused")
                return
            scope.setdefault("state", {})["form_token"] = self.form_token

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, secured)

    def _signed_in(self, headers: dict[str, str]) -> bool:
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header is no cookie
            return False
        given = cookie.get(self.cookie)
        return (
            given is not None
            and self.token is not None
            and hmac.compare_digest(given.value.encode(), self.token.encode())
        )

    def form_ok(self, given: str | None) -> bool:
        """Whether a form's token is this server's (every POST handler asks)."""
        return given is not None and hmac.compare_digest(given.encode(), self.form_token.encode())


# What a path may hold as is in a Location header; anything else (a backslash,
# a space, a tab or newline a browser would drop) is percent-encoded.
_PATH_SAFE = re.compile(rb"[^A-Za-z0-9\-._~!$&'()*+,;=:@%/]")


def same_site(path: str) -> str:
    """``path`` (as sent, still encoded) as a Location that stays on this site.

    A path starting ``//`` or ``/\\`` is read by browsers as another host
    (``//evil.example/x``); one not starting with ``/`` (``https:…``) as an
    absolute URL. Every unsafe byte is encoded, then the leading slashes are
    collapsed into one: always a path on this origin.
    """
    encoded = _PATH_SAFE.sub(lambda found: b"%%%02X" % found[0][0], path.encode("latin-1", "replace"))
    return "/" + encoded.decode("ascii").lstrip("/")


async def _plain(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + HEADERS})
    await send({"type": "http.response.body", "body": body})


async def _redirect(send: Send, target: str, cookie: str) -> None:
    headers = [
        (b"location", target.encode("latin-1", "replace")),
        (b"set-cookie", cookie.encode()),
        (b"content-length", b"0"),
    ]
    await send({"type": "http.response.start", "status": 303, "headers": headers + HEADERS})
    await send({"type": "http.response.body", "body": b""})
