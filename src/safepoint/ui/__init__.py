"""``safepoint ui``: a web inspector over any store — runs, a run's timeline, a step's conversation,
diffs between steps, verification, and (only when allowed) answer, cancel and requeue.

Needs the ``ui`` extra (``pip install 'safepoint[ui]'``: Starlette, uvicorn, Jinja2).
``create_app(store, ...)`` is the ASGI app (``app.py``), behind its guard
(``guard.py``: Host check, token, cross-site writes refused, a strict
content security policy); ``pages.py`` reads what each page shows,
``chart.py`` draws the timeline, ``paths.py`` puts any run id in a URL. Every
asset is in ``static/`` and ``templates/``: no CDN, it works offline.
See docs/ui.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from safepoint.errors import MissingExtra

if TYPE_CHECKING:
    from .guard import Guard

__all__ = ["create_app"]


def create_app(*args: Any, **kwargs: Any) -> Guard:
    """The inspector's ASGI app (see ``app.create_app``); ``MissingExtra`` without the ``ui`` extra."""
    try:
        from .app import create_app as make  # noqa: PLC0415
    except ImportError as exc:
        raise MissingExtra("the inspector (safepoint ui)", "ui", exc.name or "starlette") from exc
    return make(*args, **kwargs)
