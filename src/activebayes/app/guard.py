"""The labelling app's gate: the access token, the request body limit, the security headers.

Who may do what:

- **Pages and their static files** (``/``, ``/dashboard``, ``/static/...``) are the same
  for everybody and hold no project data: they are served without the token, so a
  reload works without a cookie. A page address may carry ``?token=TOKEN`` (the
  address ``activebayes label`` prints): a wrong one is refused (401); the page's
  script keeps the right one in the browser's ``localStorage``, which is private to
  this origin (scheme, host *and port*), and takes it out of the address bar.
- **The API** (``/api/...``) needs the token in an ``Authorization: Bearer TOKEN`` or
  ``X-Token`` header, compared in constant time over its full length. No cookie is
  ever set or read: cookies are not isolated by port, so a token cookie would be sent
  to every other service on the same host. The query string is never accepted on the
  API (addresses end up in logs and histories).

Bodies are limited to ``max_body`` bytes (411 without a length, 413 beyond it).
Every error is JSON ``{"error": message}``.
"""

from __future__ import annotations

import secrets
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.responses import JSONResponse

__all__ = ["DEFAULT_MAX_BODY", "MIN_TOKEN_LENGTH", "Guard", "HTTPError", "error_response"]

DEFAULT_MAX_BODY = 16 * 1024
MIN_TOKEN_LENGTH = 16
PUBLIC_PAGES = ("/", "/dashboard")
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"content-security-policy",
     b"default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; frame-ancestors 'none'"),
]
_DIGITS = 15  # a Content-Length longer than this is too large whatever max_body is (and int() of it is cheap)


class HTTPError(Exception):
    """A clean 4xx answer: ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class BodyTooLarge(Exception):
    """Raised by the guarded ``receive`` once a body passes the limit."""


def error_response(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _is_public(path: str) -> bool:
    return path in PUBLIC_PAGES or (path.startswith("/static/") and "/" not in path[len("/static/"):])


class Guard:
    """ASGI middleware: the access token on the API, a body limit, security headers (see the module docstring)."""

    def __init__(self, app: Callable[..., Awaitable[None]], *, token: str, max_body: int = DEFAULT_MAX_BODY) -> None:
        self.app = app
        self.token = token
        self.max_body = max_body

    def valid(self, candidate: str | None) -> bool:
        """``candidate`` is the token: same length and every character (constant time)."""
        return candidate is not None and secrets.compare_digest(candidate.encode(), self.token.encode())

    def offered(self, headers: dict[str, str]) -> list[str]:
        """The tokens a request offers in its headers (``Authorization: Bearer`` and ``X-Token``)."""
        found = []
        bearer = headers.get("authorization")
        if bearer is not None and bearer[:7].lower() == "bearer ":
            found.append(bearer[7:])
        if "x-token" in headers:
            found.append(headers["x-token"])
        return found

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        path = scope["path"]
        query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        async def refuse(status: int, message: str) -> None:
            await error_response(status, message)(scope, receive, send_with_headers)

        if _is_public(path) and scope["method"] in ("GET", "HEAD"):
            if "token" in query and not self.valid(query["token"][0]):
                await refuse(401, "wrong access token in the address: open the address `activebayes label` "
                                  "printed (it ends in ?token=...)")
                return
            await self.app(scope, receive, send_with_headers)
            return
        if "token" in query:
            await refuse(401, "the access token is accepted in the address only on a page (/?token=...); "
                              "send it to the API in an Authorization: Bearer or X-Token header")
            return
        if not any(self.valid(t) for t in self.offered(headers)):
            await refuse(401, "missing or wrong access token: send it in an Authorization: Bearer or X-Token "
                              "header (the page does; open the address `activebayes label` printed, which ends "
                              "in ?token=...)")
            return
        if scope["method"] in ("POST", "PUT", "PATCH"):
            length = headers.get("content-length")
            if length is None and "chunked" not in headers.get("transfer-encoding", ""):
                await refuse(411, "a request body needs a Content-Length header")
                return
            if length is not None and not (length.isascii() and length.isdigit()):
                await refuse(400, f"Content-Length must be a number of bytes, got {length[:20]!r}")
                return
            if length is not None and (len(length) > _DIGITS or int(length) > self.max_body):
                await refuse(413, f"request body larger than {self.max_body} bytes")
                return
        seen = 0
        started = False

        async def limited_receive() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    raise BodyTooLarge()
            return message

        async def send_started(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send_with_headers(message)

        try:
            await self.app(scope, limited_receive, send_started)
        except BodyTooLarge:
            if not started:
                await refuse(413, f"request body larger than {self.max_body} bytes")
