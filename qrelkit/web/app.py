"""The ASGI app (Starlette): routes, sessions, CSRF, errors. HTML pages are rendered on the
server with Jinja2 (autoescape on: every text is escaped); ``/api/...`` is the same in JSON for
scripts and load tests (the same session cookie and the same CSRF rule: header ``X-CSRF-Token``).

Every refused request is a 4xx with a clear message (HTML or JSON by ``Accept``); anything else
that goes wrong is logged and answered with a plain 500 and no traceback.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import logging
import os
import secrets
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
import pyarrow as pa
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from qrelkit.campaign.prefs import export_preferences
from qrelkit.config import WebParams
from qrelkit.errors import InputError
from qrelkit.io.tables import write_table
from qrelkit.web.logins import REFUSED, Logins
from qrelkit.web.organizer import line_chart
from qrelkit.web.prefs import PreferenceViews
from qrelkit.web.service import Account, CampaignService, WebError, records_csv, topic_links
from qrelkit.web.session import COOKIE, CSRF_FIELD, CSRF_HEADER, MAX_AGE, Session, Sessions, csrf_ok, new_sid
from qrelkit.web.view import highlighted
from qrelkit.web.worker import Advancer

log = logging.getLogger("qrelkit.web")

#: headers of every response: no script but the app's own files (no inline script, no other
#: origin), no framing, no type sniffing, no referrer (login links carry a token); styles may be
#: inline (the campaign report's) and images data: URLs (its figures)
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
                               "frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class SecurityHeaders:
    """ASGI middleware: :data:`SECURITY_HEADERS` on every response, and ``Cache-Control:
    no-store`` on every one but the static files (pages and data are an account's)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = scope.get("path", "").startswith("/static/")

        async def send_with_headers(message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for k, v in SECURITY_HEADERS.items():
                    headers[k] = v
                if not static:
                    headers["Cache-Control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_with_headers)


class _TooLarge(Exception):
    pass


class BodyLimit:
    """ASGI middleware: a request whose body is over ``limit`` bytes (``[web] max_request_bytes``)
    is answered 413 without being read further, by its ``Content-Length`` or, without one, as the
    body arrives; the answer never echoes the body."""

    def __init__(self, app, limit: int) -> None:
        self.app, self.limit = app, int(limit)

    async def _refuse(self, scope, receive, send) -> None:
        msg = f"request body over {self.limit} bytes"
        json_wanted = scope.get("path", "").startswith("/api/") or any(
            k == b"accept" and b"application/json" in v for k, v in scope.get("headers", ()))
        resp = JSONResponse({"error": msg, "status": 413}, status_code=413) if json_wanted else \
            PlainTextResponse(msg, status_code=413)
        await resp(scope, receive, send)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length", b"")
        if length.isdigit() and int(length) > self.limit:
            await self._refuse(scope, receive, send)
            return
        seen, started = 0, False

        async def counted():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge
            return message

        async def tracked(message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except _TooLarge:
            if not started:
                await self._refuse(scope, receive, send)

#: HTTP status of the library's input errors met while serving a request
RULE_STATUS = {"conflict": 409, "unknown-item": 404, "unknown-topic": 404, "unknown-assessor": 404,
               "store-locked": 503, "input-changed": 409, "input-missing": 409, "task-finished": 409,
               "nothing-to-undo": 409, "campaign-busy": 409}


#: the longest piece of a request an error message repeats, and the longest message
INPUT_SHOWN, MESSAGE_MAX = 80, 600


LOGIN_COOKIE = "qrelkit_login"  # the login page's nonce (SameSite=Strict: never sent from another site)


async def login_post_ok(request: Request) -> bool:
    """A login POST without a session comes from this app's login page — a browser's (it sends
    ``Origin``; ``null`` here, as the pages' Referrer-Policy is no-referrer) carries the page's
    nonce in the form and in its SameSite=Strict cookie, which another site's form cannot — or
    from an API client (no ``Origin`` header)."""
    if request.headers.get("origin") is None:
        return True
    form = await request.form()
    given, kept = form.get("nonce"), request.cookies.get(LOGIN_COOKIE)
    return isinstance(given, str) and bool(kept) and hmac.compare_digest(given, kept)


def clipped(message: str, inputs: list[str]) -> str:
    """``message`` with every long piece of input in it (as it is, or as ``repr`` shows it) cut to
    :data:`INPUT_SHOWN` characters, and the whole to :data:`MESSAGE_MAX` (escaped by the page
    or the JSON that shows it).

    >>> clipped("no topic " + "x" * 200 + " for you", ["x" * 200])
    'no topic xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx… for you'
    """
    for v in sorted({v for v in inputs if isinstance(v, str) and len(v) > INPUT_SHOWN}, key=len, reverse=True):
        for form in (v, repr(v)[1:-1]):
            message = message.replace(form, form[:INPUT_SHOWN] + "…")
    return message if len(message) <= MESSAGE_MAX else message[:MESSAGE_MAX] + "…"


class EscapedJSON(JSONResponse):
    """JSON with ``<``, ``>`` and ``&`` as ``\\u`` escapes (the same JSON): an error that repeats
    input never carries markup, whoever renders it."""

    def render(self, content: Any) -> bytes:
        raw = super().render(content)
        return raw.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")


def wants_json(request: Request) -> bool:
    """JSON for ``/api/...`` and for clients that ask for it first (``Accept``)."""
    if request.url.path.startswith("/api/") or request.url.path == "/healthz":
        return True
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept.split("application/json")[0]


class _Web:
    """The handlers, sharing the service, the sessions and the templates."""

    def __init__(self, svc: CampaignService, sessions: Sessions, env: jinja2.Environment) -> None:
        self.svc, self.sessions, self.env = svc, sessions, env
        self.prefs = PreferenceViews(svc)
        self.logins = Logins(svc, WebParams.from_config(svc.cfg))

    # -- plumbing ----------------------------------------------------------------------------------

    def page(self, name: str, request: Request, status: int = 200, **ctx: Any) -> HTMLResponse:
        html = self.env.get_template(name).render(request=request, **ctx)
        return HTMLResponse(html, status_code=status)

    def error(self, request: Request, status: int, message: str, links: tuple = (),
              headers: dict | None = None) -> Response:
        """A refused request's answer: JSON or the error page, with ``links`` to go on from there;
        any request input the message repeats is clipped (:func:`clipped`)."""
        inputs = [*request.path_params.values(), *request.query_params.values(),
                  *getattr(request.state, "inputs", {}).values()]
        message = clipped(message, [str(v) for v in inputs])
        if wants_json(request):
            return EscapedJSON({"error": message, "status": status,
                                **({"links": [{"href": h, "label": t} for h, t in links]} if links else {})},
                               status_code=status, headers=headers)
        resp = self.page("error.html", request, status=status, status_code=status, message=message, links=links,
                         home=self._home(request))
        resp.headers.update(headers or {})
        return resp

    def _home(self, request: Request) -> tuple[str, str] | None:
        """Where an error page leads back to: one's topics, the organizer's page for an organizer
        without topics, nowhere without a session (its page says to ask for a new link)."""
        try:
            sess, _ = self.session(request)
            acc = None if sess is None else self.svc.account(sess.name, sess.generation)
        except Exception:  # an error page never fails on its way back: without a link then
            return None
        if acc is None:
            return None
        if acc.organizer and not self.svc.visible_topics(acc):
            return "/organizer", "back to the organizer's page"
        return "/", "back to your topics"

    def session(self, request: Request) -> tuple[Session | None, bool]:
        """The request's session when the store still honours it (not logged out, not idle
        too long) and whether its ``last_seen`` is due to be written."""
        sess = self.sessions.read(request.cookies.get(COOKIE))
        if sess is None:
            return None, False
        alive, due = self.logins.alive(sess)
        return (sess, due) if alive else (None, False)

    async def auth(self, request: Request, *, post: bool = False,
                   organizer: bool = False) -> tuple[Account, Session, dict[str, Any]]:
        """The request's account and session (401 without a valid one: a revoked account's
        session is refused at once), its data (form or JSON) and, for a POST, the CSRF check
        (403). ``organizer``: 403 for other accounts."""
        # primary-key reads of small tables (WAL: never blocked by a writer), in the event loop's
        # thread: a hop to the thread pool and back costs more, on a busy machine much more
        sess, due = self.session(request)
        acc = None if sess is None else self.svc.account(sess.name, sess.generation)
        if acc is None or sess is None:
            raise WebError(401, "you are not logged in (or your session ended: logged out, or idle too long): "
                                "open a login link from your organizer")
        if due:
            await run_in_threadpool(self.logins.touch, sess.sid)
        data: dict[str, Any] = {}
        if post:
            if request.headers.get("content-type", "").startswith("application/json"):
                try:
                    body = await request.json()
                except ValueError:
                    raise WebError(400, "the request body is not JSON") from None
                if not isinstance(body, dict):
                    raise WebError(400, "the request body must be a JSON object")
                data = body
            else:
                form = await request.form()
                data = {k: v for k, v in form.items() if isinstance(v, str)}
            request.state.inputs = data
            if not csrf_ok(sess, request.headers.get(CSRF_HEADER) or data.get(CSRF_FIELD)):
                raise WebError(403, "missing or bad CSRF token: reload the page and try again")
        if organizer and not acc.organizer:
            raise WebError(403, "this page is for the campaign's organizers")
        return acc, sess, data

    @staticmethod
    def field(data: dict[str, Any], name: str) -> str:
        v = data.get(name)
        if v is None or str(v).strip() == "":
            raise WebError(400, f"the request lacks {name}")
        return str(v).strip()

    @staticmethod
    def grade(data: dict[str, Any]) -> Any:
        """The ``grade`` field as sent (not stripped: the scale takes plain digits only)."""
        v = data.get("grade")
        if v is None or (isinstance(v, str) and v == ""):
            raise WebError(400, "the request lacks grade")
        return v

    # -- public pages ------------------------------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        """``{"status": "ok"}`` (503 ``not ok`` when the store cannot be read); the details
        (paths, schema, runner and its errors) for an organizer's session only."""
        try:
            health = await run_in_threadpool(self.svc.health)
        except Exception as exc:  # noqa: BLE001 - a health check answers, whatever broke
            log.error("health check failed", exc_info=exc)
            return JSONResponse({"status": "not ok"}, status_code=503)
        try:
            await self.auth(request, organizer=True)
        except WebError:
            return JSONResponse({"status": health["status"]})
        return JSONResponse(health)

    async def login(self, request: Request) -> Response:
        """GET /login/{token}: a page with a button that logs in (POST): opening a link — a mail
        scanner's or a chat preview's fetch too — never uses it up. POST exchanges the link for a
        session (once; from this app's own page: a foreign ``Origin`` is refused). The person
        logged in already goes straight in; someone else's browser is asked "continue as NAME?"
        (POST, the current session's CSRF token), which ends the current session first. Refused
        links count as failed logins of the client's address (429 past the limit)."""
        client = request.client.host if request.client else "?"
        self.logins.failures.check(client)
        token = request.path_params["token"]
        why, acc = await run_in_threadpool(self.logins.link, token)
        sess, _ = self.session(request)
        current = None if sess is None else self.svc.account(sess.name, sess.generation)
        if current is not None and acc is not None and current.name == acc.name:
            return RedirectResponse("/", status_code=303)  # the same person: straight in
        if why != "ok" or acc is None:
            self.logins.failures.failed(client)
            raise WebError(403, REFUSED[why])
        if request.method == "GET":
            if current is not None and sess is not None:
                return self.page("login_confirm.html", request, account=current, csrf=sess.csrf, other=acc.name,
                                 token=token)
            nonce = secrets.token_urlsafe(16)
            resp = self.page("login.html", request, person=acc.name, token=token, nonce=nonce)
            resp.set_cookie(LOGIN_COOKIE, nonce, max_age=900, httponly=True, samesite="strict",
                            secure=request.url.scheme == "https", path="/login")
            return resp
        if current is not None:
            _, old, _ = await self.auth(request, post=True)
            await run_in_threadpool(self.logins.end, old.sid)
        elif not await login_post_ok(request):
            raise WebError(403, "log in with the button of the page your login link opens")
        sid = new_sid()
        try:
            acc = await run_in_threadpool(self.logins.exchange, token, sid)
        except WebError:
            self.logins.failures.failed(client)
            raise
        _, cookie = self.sessions.new(acc.name, acc.generation, sid)
        topics = await run_in_threadpool(self.svc.visible_topics, acc)
        resp = RedirectResponse("/organizer" if acc.organizer and not topics else "/", status_code=303)
        resp.set_cookie(COOKIE, cookie, max_age=MAX_AGE, httponly=True, samesite="lax",
                        secure=request.url.scheme == "https", path="/")
        return resp

    async def logout(self, request: Request) -> Response:
        """Ends the session in the store: the cookie, if kept, is refused from now on; the page
        after it says how to come back (a new link: the old one opened this session)."""
        _, sess, _ = await self.auth(request, post=True)
        await run_in_threadpool(self.logins.end, sess.sid)
        resp = RedirectResponse("/logged-out", status_code=303)
        resp.delete_cookie(COOKIE, path="/")
        return resp

    # -- the assessor ------------------------------------------------------------------------------

    async def logged_out(self, request: Request) -> Response:
        """GET /logged-out: what to do to log in again."""
        return self.page("logged_out.html", request)

    async def picker(self, request: Request) -> Response:
        acc, sess, _ = await self.auth(request)
        rows = await run_in_threadpool(self.svc.topics_overview, acc)
        prefs = await run_in_threadpool(self.prefs.overview, acc)
        return self.page("picker.html", request, account=acc, csrf=sess.csrf, topics=rows, prefs=prefs,
                         free_choice=self.svc.free_choice)

    async def topic(self, request: Request) -> Response:
        acc, sess, _ = await self.auth(request)
        qid = request.path_params["qid"]
        view = await run_in_threadpool(self.svc.next_item, acc, qid, sess.sid)
        return self.page("topic.html", request, account=acc, csrf=sess.csrf, v=view, grades=self.svc.grade_names(),
                         **self._guide_and_keys(self.topic_keys()))

    def topic_keys(self) -> list[tuple[str, str]]:
        """The keys of a topic page, for its help overlay."""
        keys = [(str(g), f"grade {name}") for g, name in self.svc.grade_names()]
        keys += [("s", "skip this passage (it comes back later)"),
                 ("r", "review and change your judgments on this topic"), ("h", "highlight the query's terms, or not")]
        return keys

    def _guide_and_keys(self, keys: list[tuple[str, str]]) -> dict[str, Any]:
        """A judging or preference page's ``guidelines`` (the campaign has some: read once) and
        its help overlay's ``keys`` (``g`` added then)."""
        guide = bool(self.svc.guidelines_path)
        return {"guidelines": guide, "keys": keys + ([("g", "the guidelines (g again: back)")] if guide else [])}

    async def guidelines(self, request: Request) -> Response:
        """GET /guidelines: the campaign's guidelines (``[web] guidelines``), rendered safely."""
        acc, sess, _ = await self.auth(request)
        html = await run_in_threadpool(self.svc.guidelines)
        return self.page("guidelines.html", request, account=acc, csrf=sess.csrf, html=html)

    async def act(self, request: Request) -> Response:
        """POST /topics/{qid}/{judge|change|skip|take} (forms) and /api/topics/{qid}/{judgments|change|skip|take}."""
        acc, sess, data = await self.auth(request, post=True)
        qid, action = request.path_params["qid"], request.path_params["action"]
        if action in ("judge", "judgments", "skip"):  # someone else's topic: 404 whatever the body lacks
            await run_in_threadpool(self.svc.check_topic, acc, qid)
        if action in ("judge", "judgments"):
            res = await run_in_threadpool(self.svc.judge, acc, qid, self.field(data, "batch_id"), self.field(data, "docid"),
                                          self.grade(data), sess.sid)
        elif action == "change":
            return await self.change(request, acc, qid, data)
        elif action == "undo":
            raise WebError(410, "undo is replaced by the review of your judgments, where any of them can be changed",
                           links=topic_links(qid))
        elif action == "take":
            res = await run_in_threadpool(self.svc.take, acc, qid)
        elif action == "skip":
            res = await run_in_threadpool(self.svc.skip, acc, qid, self.field(data, "batch_id"),
                                          self.field(data, "docid"), sess.sid)
        else:
            raise WebError(404, f"no action {action!r}")
        if wants_json(request):
            return JSONResponse(res)
        return RedirectResponse(f"/topics/{qid}", status_code=303)

    async def change(self, request: Request, acc: Account, qid: str, data: dict[str, Any]) -> Response:
        """POST /topics/{qid}/change (form: back to the review, the changed row marked) and
        /api/topics/{qid}/change (JSON): ``docid, grade``."""
        docid = self.field(data, "docid")
        res = await run_in_threadpool(self.svc.change, acc, qid, docid, self.grade(data))
        if wants_json(request):
            return JSONResponse(res)
        return RedirectResponse(f"/topics/{quote(qid, safe='')}/review?saved={quote(docid, safe='')}", status_code=303)

    async def review(self, request: Request) -> Response:
        """GET /topics/{qid}/review (the page) and /api/topics/{qid}/review (the same in JSON)."""
        acc, sess, _ = await self.auth(request)
        view = await run_in_threadpool(self.svc.review, acc, request.path_params["qid"])
        if wants_json(request):
            return JSONResponse(view)
        return self.page("review.html", request, account=acc, csrf=sess.csrf, v=view, grades=self.svc.grade_names(),
                         saved=request.query_params.get("saved"))

    # -- preference tasks --------------------------------------------------------------------------

    async def pref_task(self, request: Request) -> Response:
        """GET /prefs/{task_id} (the page) and /api/prefs/{task_id} (the same in JSON)."""
        acc, sess, _ = await self.auth(request)
        view = await run_in_threadpool(self.prefs.view, acc, request.path_params["task_id"])
        if wants_json(request):
            return JSONResponse(view)
        keys = [("← f 1", "the left passage is better"), ("→ j 2", "the right passage is better"),
                ("u", "undo your last answer")]
        return self.page("prefs.html", request, account=acc, csrf=sess.csrf, v=view, **self._guide_and_keys(keys))

    async def pref_answer(self, request: Request) -> Response:
        """POST /prefs/{task_id}/answer (form) and /api/prefs/{task_id}/answers (JSON): ``slot, choice``."""
        acc, _, data = await self.auth(request, post=True)
        task_id = request.path_params["task_id"]
        res = await run_in_threadpool(self.prefs.answer, acc, task_id, self.field(data, "slot"), self.field(data, "choice"))
        if wants_json(request):
            return JSONResponse(res)
        return RedirectResponse(f"/prefs/{quote(task_id, safe='')}", status_code=303)

    async def pref_undo(self, request: Request) -> Response:
        """POST /prefs/{task_id}/undo (form) and /api/prefs/{task_id}/undo (JSON): ``slot``, the
        comparison whose answer (the last one in force) is undone, and optionally ``answer``, that
        answer's number (the page sends it: a replayed undo then never takes back a newer answer)."""
        acc, _, data = await self.auth(request, post=True)
        task_id = request.path_params["task_id"]
        res = await run_in_threadpool(self.prefs.undo, acc, task_id, self.field(data, "slot"), data.get("answer"))
        if wants_json(request):
            return JSONResponse(res)
        return RedirectResponse(f"/prefs/{quote(task_id, safe='')}", status_code=303)

    async def api_prefs(self, request: Request) -> Response:
        acc, _, _ = await self.auth(request)
        return JSONResponse({"tasks": await run_in_threadpool(self.prefs.overview, acc)})

    # -- the JSON API ------------------------------------------------------------------------------

    async def api_session(self, request: Request) -> Response:
        acc, sess, _ = await self.auth(request)
        return JSONResponse({"name": acc.name, "organizer": acc.organizer, "csrf": sess.csrf})

    async def api_topics(self, request: Request) -> Response:
        acc, _, _ = await self.auth(request)
        return JSONResponse({"topics": await run_in_threadpool(self.svc.topics_overview, acc)})

    async def api_topic(self, request: Request) -> Response:
        acc, sess, _ = await self.auth(request)
        return JSONResponse(await run_in_threadpool(self.svc.next_item, acc, request.path_params["qid"], sess.sid))

    async def api_state(self, request: Request) -> Response:
        acc, sess, _ = await self.auth(request)
        return JSONResponse(await run_in_threadpool(self.svc.poll, acc, request.path_params["qid"], sess.sid))

    async def api_batch(self, request: Request) -> Response:
        acc, _, _ = await self.auth(request)
        p = request.path_params
        return JSONResponse(await run_in_threadpool(self.svc.batch_view, acc, p["qid"], p["batch_id"]))

    async def api_judgments(self, request: Request) -> Response:
        acc, _, _ = await self.auth(request)
        return JSONResponse({"judgments": await run_in_threadpool(self.svc.my_judgments, acc,
                                                                  request.query_params.get("qid"))})

    # -- the organizer -----------------------------------------------------------------------------

    def _organizer_data(self) -> dict[str, Any]:
        out: dict[str, Any] = {"health": self.svc.health(), "progress": self.svc.assessor_progress(),
                               "runner": self.svc.runner_view(), "stamp": self.svc.organizer_stamp(),
                               **self.svc.organizer_figures(),
                               "agreement": self.svc.agreement(), "status_error": None, "status": [],
                               "prefs": self.prefs.status(), "protocol": self.svc.protocol(),
                               "name": self.svc.name}
        try:
            out["status"] = self.svc.status_rows()
        except InputError as exc:
            out["status_error"] = str(exc)
        return out

    async def organizer(self, request: Request) -> Response:
        acc, sess, _ = await self.auth(request, organizer=True)
        data = await run_in_threadpool(self._organizer_data)
        if wants_json(request):
            return JSONResponse(data)
        return self.page("organizer.html", request, account=acc, csrf=sess.csrf, d=data)

    async def organizer_live(self, request: Request) -> Response:
        """GET /api/organizer/live: the runner and a stamp of the campaign's state, polled by the
        organizer page (static/live.js), which fetches itself again when the stamp moves."""
        await self.auth(request, organizer=True)
        stamp = await run_in_threadpool(self.svc.organizer_stamp)
        return JSONResponse({"stamp": stamp, "runner": self.svc.runner_view()})

    async def organizer_retry(self, request: Request) -> Response:
        """POST /organizer/retry (the page's button) and /api/organizer/retry: a run now."""
        await self.auth(request, post=True, organizer=True)
        res = self.svc.retry_runner()
        if wants_json(request):
            return JSONResponse(res)
        return RedirectResponse("/organizer", status_code=303)

    async def organizer_csv(self, request: Request) -> Response:
        await self.auth(request, organizer=True)
        table = request.path_params["table"]
        if table not in ("status", "progress"):
            raise WebError(404, f"no table {table!r}")
        rows = await run_in_threadpool(self.svc.status_rows if table == "status" else self.svc.assessor_progress)
        return PlainTextResponse(records_csv(rows), media_type="text/csv",
                                 headers={"content-disposition": f'attachment; filename="{table}.csv"'})

    async def pref_export(self, request: Request) -> Response:
        """/organizer/prefs/answers.csv and /organizer/prefs/tasks.parquet: what ``qrelkit prefs
        import ANSWERS --tasks TASKS`` reads."""
        await self.auth(request, organizer=True)
        name = request.path_params["name"]
        if name not in ("answers.csv", "tasks.parquet"):
            raise WebError(404, f"no preference export {name!r}")

        def build() -> bytes:  # written as 'qrelkit campaign prefs export' writes them
            tasks, answers = export_preferences(self.svc.dir)
            table = tasks if name == "tasks.parquet" else pa.Table.from_pandas(answers, preserve_index=False)
            with tempfile.TemporaryDirectory() as tmp:
                return write_table(table, Path(tmp) / name, kind="pref-tasks" if name == "tasks.parquet" else "pref-answers",
                                   params={"campaign": str(self.svc.dir)}).read_bytes()

        data = await run_in_threadpool(build)
        return Response(data, media_type="text/csv" if name.endswith(".csv") else "application/vnd.apache.parquet",
                        headers={"content-disposition": f'attachment; filename="prefs-{name}"'})

    async def report(self, request: Request) -> Response:
        await self.auth(request, organizer=True)
        path = await run_in_threadpool(self.svc.report)
        return FileResponse(path, media_type="text/html")

    async def qrels(self, request: Request) -> Response:
        await self.auth(request, organizer=True)
        name, data = await run_in_threadpool(self.svc.qrels, request.query_params.get("kind", "passages"))
        return Response(data, media_type="text/plain",
                        headers={"content-disposition": f'attachment; filename="{name}"'})


def _routes(w: _Web) -> list:
    static = os.path.join(os.path.dirname(__file__), "static")
    return [
        Route("/healthz", w.healthz),
        Route("/login/{token}", w.login, methods=["GET", "POST"]),
        Route("/logout", w.logout, methods=["POST"]),
        Route("/logged-out", w.logged_out),
        Route("/", w.picker),
        Route("/guidelines", w.guidelines),
        Route("/topics/{qid}", w.topic),
        Route("/topics/{qid}/review", w.review),
        Route("/topics/{qid}/{action}", w.act, methods=["POST"]),
        Route("/api/session", w.api_session),
        Route("/api/topics", w.api_topics),
        Route("/api/judgments", w.api_judgments),
        Route("/api/topics/{qid}", w.api_topic),
        Route("/api/topics/{qid}/state", w.api_state),
        Route("/api/topics/{qid}/review", w.review),
        Route("/api/topics/{qid}/batches/{batch_id:path}", w.api_batch),
        Route("/api/topics/{qid}/{action}", w.act, methods=["POST"]),
        Route("/prefs/{task_id}", w.pref_task),
        Route("/prefs/{task_id}/answer", w.pref_answer, methods=["POST"]),
        Route("/prefs/{task_id}/undo", w.pref_undo, methods=["POST"]),
        Route("/api/prefs", w.api_prefs),
        Route("/api/prefs/{task_id}", w.pref_task),
        Route("/api/prefs/{task_id}/answers", w.pref_answer, methods=["POST"]),
        Route("/api/prefs/{task_id}/undo", w.pref_undo, methods=["POST"]),
        Route("/organizer", w.organizer),
        Route("/api/organizer", w.organizer),
        Route("/api/organizer/live", w.organizer_live),
        Route("/organizer/retry", w.organizer_retry, methods=["POST"]),
        Route("/api/organizer/retry", w.organizer_retry, methods=["POST"]),
        Route("/organizer/report", w.report),
        Route("/organizer/qrels", w.qrels),
        Route("/organizer/prefs/{name}", w.pref_export),
        Route("/organizer/{table}.csv", w.organizer_csv),
        Mount("/static", app=StaticFiles(directory=static), name="static"),
    ]


def create_app(directory: str | os.PathLike, *, advancer: Advancer | None = None, start_worker: bool = True) -> Starlette:
    """The web app of the campaign at ``directory`` (``[not-a-campaign]`` when there is none).

    ``advancer``: the background runner (default: :class:`~qrelkit.web.worker.Advancer` over
    :func:`~qrelkit.web.worker.advance_campaign`); ``start_worker``: start it with the app (and
    ask it for a first run: a new campaign gets its first batches) — the tests may drive it."""
    svc = CampaignService(directory, advancer)
    env = jinja2.Environment(loader=jinja2.PackageLoader("qrelkit.web", "templates"), autoescape=True)
    env.filters["shown"] = shown
    env.filters["when"] = when
    env.globals["line_chart"] = line_chart
    env.filters["highlighted"] = highlighted
    w = _Web(svc, Sessions(svc.secret), env)

    async def web_error(request: Request, exc: WebError) -> Response:
        retry = getattr(exc, "retry_after", None)
        return w.error(request, exc.status, exc.message, exc.links, None if retry is None else {"Retry-After": str(retry)})

    async def http_error(request: Request, exc: HTTPException) -> Response:
        return w.error(request, exc.status_code, str(exc.detail))

    async def input_error(request: Request, exc: InputError) -> Response:
        return w.error(request, RULE_STATUS.get(exc.rule, 400), str(exc))

    async def server_error(request: Request, exc: Exception) -> Response:
        log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
        return PlainTextResponse("internal error (the server's log has the details)", status_code=500,
                                 headers={**SECURITY_HEADERS, "Cache-Control": "no-store"})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        if start_worker:
            svc.advancer.start()
            svc.advancer.request()
        try:
            yield
        finally:
            svc.advancer.stop()
            svc.close()

    app = Starlette(routes=_routes(w), lifespan=lifespan,
                    exception_handlers={WebError: web_error, HTTPException: http_error, InputError: input_error,
                                        Exception: server_error})
    app.add_middleware(BodyLimit, limit=WebParams.from_config(svc.cfg).max_request_bytes)
    app.add_middleware(SecurityHeaders)  # added last: the outer one, so a 413 carries the headers too
    app.state.service = svc
    return app


class _RedactLoginTokens(logging.Filter):
    """Access-log lines never show a login token (``/login/<token>`` -> ``/login/...``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(a.split("/login/")[0] + "/login/..." if isinstance(a, str) and "/login/" in a else a
                                for a in record.args)
        return True


def shown(value: Any) -> str:
    """A value as the organizer's tables show it: nothing for None, a number to 3 decimals, a
    table as ``key: value`` pairs, a list joined by commas (never a raw dict or list).

    >>> shown(None), shown(0.123456), shown(3), shown({"2": 210, "0": 5}), shown(["all", "local"])
    ('', '0.123', '3', '2: 210, 0: 5', 'all, local')
    """
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {shown(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(shown(v) for v in value)
    return str(value)


def when(value: Any) -> str:
    """An ISO 8601 time of the store or the runner as the organizer's pages show it: UTC, to the
    second, no ``T`` and no offset digits; nothing for None; any other text as it is.

    >>> when("2026-11-27T11:05:03.123456+00:00"), when(None), when("soon")
    ('2026-11-27 11:05:03 UTC', '', 'soon')
    """
    if value is None or value == "":
        return ""
    try:
        t = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    if t.tzinfo is not None:
        t = t.astimezone(timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S UTC")


def exposure_warning(host: str) -> str | None:
    """What to say when ``host`` is not a loopback address: the app then speaks plain HTTP to the
    network (login links and session cookies readable on the way) unless a TLS proxy fronts it.

    >>> exposure_warning("127.0.0.1") is None, exposure_warning("localhost") is None
    (True, True)
    >>> exposure_warning("0.0.0.0").startswith("warning: serving plain HTTP on 0.0.0.0")
    True
    """
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: resolved by the system, maybe to the network
        loopback = False
    if loopback:
        return None
    return (f"warning: serving plain HTTP on {host}: login links and session cookies cross the network "
            "unencrypted; put a TLS reverse proxy in front (docs/web.md, 'Serving on a network')")


def server_options(app: Starlette, *, proxy_headers: bool = False, forwarded_allow_ips: str = "127.0.0.1") -> dict:
    """uvicorn's settings for ``app``: ``[web] timeout_keep_alive`` and ``limit_concurrency``
    (uvicorn has no timeout for reading a request's headers: a slow client holds one of the
    ``limit_concurrency`` connections until the proxy in front cuts it), and with
    ``proxy_headers`` the ``X-Forwarded-Proto`` and ``-For`` of the proxies at
    ``forwarded_allow_ips`` trusted (the scheme https: cookies ``Secure``; the client's address:
    the login rate limit's). Without it, those headers are ignored."""
    web = WebParams.from_config(app.state.service.cfg)
    return {"timeout_keep_alive": web.timeout_keep_alive, "limit_concurrency": web.limit_concurrency,
            "proxy_headers": proxy_headers, "forwarded_allow_ips": forwarded_allow_ips if proxy_headers else None}


def run_server(app: Starlette, *, host: str = "127.0.0.1", port: int = 8765, proxy_headers: bool = False,
               forwarded_allow_ips: str = "127.0.0.1") -> None:
    """Serve ``app`` with uvicorn until interrupted (one process: the store is SQLite, the
    background runner one thread), with :func:`server_options`."""
    import uvicorn  # lazy: only the server needs it (the tests drive the app in-process)

    logging.getLogger("uvicorn.access").addFilter(_RedactLoginTokens())
    logging.getLogger("qrelkit.web").setLevel(logging.INFO)
    uvicorn.run(app, host=host, port=port, log_level="info",
                **server_options(app, proxy_headers=proxy_headers, forwarded_allow_ips=forwarded_allow_ips))
