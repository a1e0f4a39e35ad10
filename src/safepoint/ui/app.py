"""The inspector's ASGI app: ``create_app(store, ...)``, the routes, and what each one answers.

Every page is rendered on the server from ``pages`` through the templates
(autoescaped: stored text is always text). The store is the caller's; it is
opened read-only unless actions are allowed (``safepoint ui``
--allow-actions), and the routes that change a run exist only then.
Handlers are plain functions: Starlette runs them in its thread pool, and
the store is thread-safe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from safepoint.errors import InvalidArgument, NotFound, SafepointError, StoreUnavailable
from safepoint.store import Store
from safepoint.store.admin import IMPLICIT_TENANT, tenant_summaries

from . import actions, pages
from .cost import cost_page
from .guard import Guard
from .paths import run_id_of, run_path
from .verifying import StoreVerifier, verify_run

HERE = Path(__file__).resolve().parent


def create_app(
    store: Store,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    allowed_hosts: tuple[str, ...] = (),
    allow_actions: bool = False,
    all_tenants: bool = False,
) -> Guard:
    """The inspector over ``store``, behind its guard (``guard.Guard``).

    ``all_tenants``: the operator's overview across tenants instead (``safepoint ui
    --all-tenants``): one read-only page of every tenant's runs by status, read through a
    handle per tenant (``store/tenant_listing.py``: a role that passes row-level security);
    a tenant's runs are looked at with ``safepoint ui --tenant NAME``."""
    inspector = Inspector(store, allow_actions=allow_actions and not all_tenants)
    static = Mount("/static", app=StaticFiles(directory=str(HERE / "static")), name="static")
    if all_tenants:
        inspector.templates.env.globals["all_tenants"] = True
        routes = [Route("/", inspector.tenants), static]
    else:
        routes = [
            Route("/", inspector.home),
            Route("/run/{segment:path}", inspector.run),
            Route("/cost", inspector.cost),
            Route("/api/head/{segment:path}", inspector.head),
            Route("/verify", inspector.verify_status),
            Route("/verify", inspector.verify, methods=["POST"]),
            static,
        ]
        if allow_actions:
            routes.append(Route("/act", inspector.act, methods=["POST"]))
    guard = Guard(Starlette(routes=routes), host=host, port=port, token=token, allowed_hosts=allowed_hosts)
    inspector.guard = guard
    return guard


class Inspector:
    """The handlers: each reads its page from ``pages`` and renders it, or the error page."""

    guard: Guard

    def __init__(self, store: Store, *, allow_actions: bool) -> None:
        self.store = store
        # Autoescaping on for every template, whatever its name: stored text is always text.
        env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True)
        self.templates = Jinja2Templates(env=env)
        # The header names the tenant a tenant-scoped inspector shows (none for the implicit one).
        tenant = None if store.tenant == IMPLICIT_TENANT else store.tenant
        self.templates.env.globals.update(run_path=run_path, allow_actions=allow_actions, tenant=tenant)
        self.templates.env.globals["fork_offer"] = actions.fork_offer
        self.verifier = StoreVerifier(store)

    def render(self, request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
        context = {**context, "form_token": self.guard.form_token}
        return self.templates.TemplateResponse(request, name, context, status_code=status)

    def failed(self, request: Request, exc: Exception) -> Response:
        """The error page: a safepoint error's own text (escaped), anything else one generic line."""
        if isinstance(exc, NotFound):
            return self.render(request, "error.html", {"message": str(exc)}, 404)
        if isinstance(exc, StoreUnavailable):  # the store's outage, not the request's fault: try again
            response = self.render(request, "error.html", {"message": str(exc), "unavailable": True}, 503)
            response.headers["Retry-After"] = "5"
            return response
        if isinstance(exc, SafepointError):
            return self.render(request, "error.html", {"message": str(exc)}, 400)
        return self.render(request, "error.html", {"message": "the inspector failed on this page"}, 500)

    def home(self, request: Request) -> Response:
        q = request.query_params
        try:
            context = pages.runs_page(
                self.store,
                status=q.get("status"),
                label=q.get("label"),
                prefix=q.get("prefix"),
                cursor=q.get("cursor"),
                show_all=q.get("all") == "1",
                since=q.get("since"),
                until=q.get("until"),
                label_has=q.get("label_has"),
                sort=q.get("sort"),
                order=q.get("order"),
            )
        except Exception as exc:  # shown as a page, never as a traceback
            return self.failed(request, exc)
        return self.render(request, "runs.html", context)

    def tenants(self, request: Request) -> Response:
        """The operator's overview: every tenant, its runs by status, queued and leased."""
        try:
            summaries = list(tenant_summaries(self.store))
        except Exception as exc:  # shown as a page, never as a traceback
            return self.failed(request, exc)
        return self.render(request, "tenants.html", {"summaries": summaries})

    def run(self, request: Request) -> Response:
        run_id = run_id_of(request.path_params["segment"])
        q = request.query_params
        try:
            if run_id is None:
                raise NotFound("?")
            if "a" in q and "b" in q:
                context = pages.diff_page(self.store, run_id, _int(q["a"]), _int(q["b"]))
                return self.render(request, "diff.html", {"run_id": run_id, **context})
            if "step" in q:
                context = pages.step_page(self.store, run_id, _int(q["step"]), _int(q.get("page", "1")))
                return self.render(request, "step.html", {"run_id": run_id, **context})
            chat = _int(q["chat"]) if "chat" in q else None
            context = pages.run_page(self.store, run_id, _int(q.get("steps", "1")), q.get("find"), chat)
            return self.render(request, "run.html", {"run_id": run_id, **context})
        except Exception as exc:
            return self.failed(request, exc)

    def cost(self, request: Request) -> Response:
        q = request.query_params
        try:
            context = cost_page(self.store, by=q.get("by"), status=q.get("status"), label=q.get("label"))
        except Exception as exc:
            return self.failed(request, exc)
        return self.render(request, "cost.html", context)

    def head(self, request: Request) -> Response:
        run_id = run_id_of(request.path_params["segment"])
        try:
            info = self.store.run(run_id or "?")
        except StoreUnavailable:
            return JSONResponse({"error": "the store is unavailable"}, status_code=503)
        except Exception:
            return JSONResponse({"error": "no such run"}, status_code=404)
        return JSONResponse({"step": info.head_step, "status": info.status.value})

    async def verify(self, request: Request) -> Response:
        form = await request.form()
        if not self.guard.form_ok(_text(form.get("form_token"))):
            return Response("stale form: reload the page", status_code=403)
        run_id = _text(form.get("run_id"))
        if not run_id:
            self.verifier.start()
            return RedirectResponse("/verify", status_code=303)
        checked, failures = await run_in_threadpool(verify_run, self.store, run_id)
        context = {"run_id": run_id, "checked": checked, "failures": failures}
        return self.render(request, "verified.html", context)

    def verify_status(self, request: Request) -> Response:
        if request.headers.get("accept", "").startswith("application/json"):
            return JSONResponse(self.verifier.progress())
        return self.render(request, "verify.html", {"progress": self.verifier.progress()})

    async def act(self, request: Request) -> Response:
        form = await request.form()
        if not self.guard.form_ok(_text(form.get("form_token"))):
            return Response("stale form: reload the page", status_code=403)
        run_id, action = _text(form.get("run_id")), _text(form.get("action"))
        if action == "cancel" and _text(form.get("confirm")) != "yes":  # a second, deliberate click
            return self.render(request, "confirm.html", {"run_id": run_id})
        try:
            if action == "fork":  # to the fork's page, which shows its edit
                fields = {name: _text(form.get(name)) for name in actions.FORK_FIELDS}
                run_id = await run_in_threadpool(actions.fork, self.store, run_id, fields)
            else:
                await run_in_threadpool(actions.perform, self.store, run_id, action, _text(form.get("value")))
        except Exception as exc:
            return self.failed(request, exc)
        return RedirectResponse(run_path(run_id), status_code=303)


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InvalidArgument("a step must be a whole number") from None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
