"""Run ids in URLs: any run id, ``/``, ``..``, ``?`` and ``#`` included, as one path segment.

A run id is percent-encoded whole (nothing left bare but letters, digits and
``-_.~``) behind a ``~``, so that it is always one segment the browser
passes on untouched: ``..`` would be a dot segment a browser resolves away,
``~..`` is not. The server gets the decoded path and takes the id back
from behind the ``~``.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

MARK = "~"


def run_path(run_id: str, **query: object) -> str:
    """The run page's path (``/run/~<id>``), with ``query`` (step, diff) when given."""
    path = "/run/" + MARK + quote(run_id, safe="")
    given = {k: v for k, v in query.items() if v is not None}
    return path + ("?" + urlencode(given) if given else "")


def run_id_of(segment: str) -> str | None:
    """The run id a decoded ``/run/<segment>`` names; None when it is not one this module made."""
    return segment[len(MARK) :] if segment.startswith(MARK) and len(segment) > len(MARK) else None
