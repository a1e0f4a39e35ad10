"""Where an ADK session and its shared state live: run ids and labels (no I/O, no ADK import).

Every id a caller gives (app name, user id, session id) may be hostile — a
path like ``../../x``, NUL, a lone surrogate, SQL. Run ids and label values
hold each id percent-encoded (every byte outside letters, digits and
``-._~``), so ``/`` separates the parts unambiguously, two different ids never
share a run or a label value, and nothing a label or a run id refuses (NUL,
lone surrogates) reaches one. A run id longer than the store's 255 characters
becomes the SHA-256 of its parts.
"""

from __future__ import annotations

import hashlib
import json
from urllib.parse import quote

ADAPTER_LABEL = "safepoint.adapter"
ADAPTER = "google-adk"
ROLE_LABEL = "safepoint.role"  # "index" hides a run from `safepoint runs` (safepoint.frameworks)
KIND_LABEL = "google_adk.role"  # session, app-state or user-state
APP_LABEL = "google_adk.app_name"
USER_LABEL = "google_adk.user_id"
SESSION_LABEL = "google_adk.session_id"
_MAX_RUN_ID = 255


def encoded(value: str) -> str:
    """``value`` percent-encoded as UTF-8 (lone surrogates too): safe in a run id and a label."""
    return quote(value, safe="", errors="surrogatepass")


def _fitted(prefix: str, parts: list[str]) -> str:
    run_id = prefix + "/".join(encoded(part) for part in parts)
    if len(run_id) <= _MAX_RUN_ID:
        return run_id
    raw = json.dumps(parts, ensure_ascii=True).encode("ascii")  # lone surrogates as \ud800: no error
    return prefix + "#" + hashlib.sha256(raw).hexdigest()


def session_run_id(app_name: str, user_id: str, session_id: str) -> str:
    """The run holding one session's events and state."""
    return _fitted("google-adk/", [app_name, user_id, session_id])


def app_run_id(app_name: str) -> str:
    """The run holding the ``app:`` state every session of ``app_name`` shares."""
    return _fitted("google-adk-app/", [app_name])


def user_run_id(app_name: str, user_id: str) -> str:
    """The run holding the ``user:`` state every session of one user of ``app_name`` shares."""
    return _fitted("google-adk-user/", [app_name, user_id])


def session_labels(app_name: str, user_id: str, session_id: str) -> dict[str, str]:
    """The labels of a session run: what ``list_sessions`` filters on."""
    return {
        ADAPTER_LABEL: ADAPTER,
        KIND_LABEL: "session",
        APP_LABEL: encoded(app_name),
        USER_LABEL: encoded(user_id),
        SESSION_LABEL: encoded(session_id),
    }


def sessions_filter(app_name: str, user_id: str | None) -> dict[str, str]:
    """The labels every session of ``app_name`` (of ``user_id``, when given) carries."""
    labels = {ADAPTER_LABEL: ADAPTER, KIND_LABEL: "session", APP_LABEL: encoded(app_name)}
    if user_id is not None:
        labels[USER_LABEL] = encoded(user_id)
    return labels


def shared_labels(app_name: str, user_id: str | None) -> dict[str, str]:
    """The labels of a shared-state run (bookkeeping to `safepoint runs`: ``safepoint.role=index``)."""
    labels = {ADAPTER_LABEL: ADAPTER, ROLE_LABEL: "index", APP_LABEL: encoded(app_name)}
    if user_id is None:
        labels[KIND_LABEL] = "app-state"
    else:
        labels[KIND_LABEL] = "user-state"
        labels[USER_LABEL] = encoded(user_id)
    return labels
