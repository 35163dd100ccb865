"""What keeps the dashboard safe to open: optional token auth, CSRF tokens, strict headers.

Every page is plain HTML and forms: no script runs in it, so the Content-Security-Policy
forbids scripts outright, and job data (untrusted input) is escaped by Jinja2's autoescape.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import logging
import re
import secrets
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN_COOKIE = "alkstore_token"
"""The cookie that remembers a valid ``?token=`` so links need not carry it (it holds
:func:`cookie_value`, not the token)."""

CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
"""No script at all, nothing from elsewhere, never framed (clickjacking)."""


def new_secret() -> str:
    """A random URL-safe secret (a CSRF token of one server process)."""
    return secrets.token_urlsafe(32)


def same(given: str | None, expected: str) -> bool:
    """Whether ``given`` is ``expected``, compared in constant time."""
    return given is not None and secrets.compare_digest(given.encode(), expected.encode())


class GuardMiddleware:
    """Refuse a request without the token (when one is set) and add the safety headers.

    The token is accepted as ``Authorization: Bearer …``, from the cookie, or once as
    ``?token=…``, which sets the cookie (HttpOnly, SameSite=Strict, and Secure when served
    over https) and redirects to the same page without it, so the token does not stay in the
    address bar or history (:class:`TokenLogFilter` keeps it out of the access log).
    """

    def __init__(self, app: ASGIApp, *, token: str | None) -> None:
        self.app = app
        self.token = token
        self.cookie = None if token is None else cookie_value(token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the token, then pass the request on with the safety headers added."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if self.token is not None:
            refusal = self._check(request)
            if refusal is not None:
                await _with_headers(refusal)(scope, receive, send)
                return

        async def send_with_headers(message: dict[str, object]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))  # type: ignore[call-overload]
                headers += [(k.encode(), v.encode()) for k, v in SAFETY_HEADERS.items()]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)  # type: ignore[arg-type]

    def _check(self, request: Request) -> Response | None:
        assert self.token is not None and self.cookie is not None
        header = request.headers.get("authorization", "")
        if header.startswith("Bearer ") and same(header[7:], self.token):
            return None
        if same(request.cookies.get(TOKEN_COOKIE), self.cookie):
            return None
        query = request.query_params
        if same(query.get("token"), self.token) and request.method == "GET":
            rest = urlencode([(k, v) for k, v in query.multi_items() if k != "token"])
            target = request.url.path + (f"?{rest}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(
                TOKEN_COOKIE,
                self.cookie,
                httponly=True,
                samesite="strict",
                secure=request.url.scheme == "https",  # never sent back over plain http then
                path="/",
            )
            return response
        return HTMLResponse(_token_form(request), status_code=401)


def cookie_value(token: str) -> str:
    """What the cookie holds for ``token``: a keyed hash of it, not the token itself, so a
    cookie read off a browser is no bearer token (for ``/`` with ``Authorization`` or a
    scraper)."""
    return hmac.new(token.encode(), b"alkstore dashboard cookie", hashlib.sha256).hexdigest()


def _token_form(request: Request) -> str:
    """The 401 page: a form that asks for the token and opens the same page with it (the
    ``?token=`` entry above), keeping the page's other query parameters."""
    kept = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
        for k, v in request.query_params.multi_items()
        if k != "token"
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<title>401 · alkstore dashboard</title></head><body><h1>401</h1>"
        "<p>This dashboard needs its token.</p>"
        f'<form method="get" action="{html.escape(request.url.path)}">{kept}'
        '<label>token <input type="password" name="token" autocomplete="current-password"'
        " required autofocus></label> <button>Open</button></form></body></html>"
    )


class TokenLogFilter(logging.Filter):
    """Blanks the value of a ``token`` query parameter in uvicorn's access log lines (the
    request that brings ``?token=…`` is logged with its query)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record's string arguments (uvicorn's access formatter reads them one
        by one, so they keep their places); always log the line."""
        if isinstance(record.args, tuple):
            record.args = tuple(
                TOKEN_IN_QUERY.sub(r"\1***", arg) if isinstance(arg, str) else arg
                for arg in record.args
            )
        return True


TOKEN_IN_QUERY = re.compile(r"([?&]token=)[^&#\s]*")
"""A ``token`` parameter in a URL's query; group 1 is what stays of it."""


SAFETY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make forms send Origin: null
    "X-Frame-Options": "DENY",
}
"""Headers every response carries."""


def _with_headers(response: Response) -> Response:
    response.headers.update(SAFETY_HEADERS)
    return response
