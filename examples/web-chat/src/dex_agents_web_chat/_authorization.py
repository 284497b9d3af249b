"""Who may use the chat: the hook every route calls, and a bearer-token version of it.

Every route calls ``authorize(request, session_id)`` before it does anything, with the session ID
the route names (``None`` for the page and for starting a session). The session ID and the resume
token come from the browser, so an application with several users checks there that the caller
may read that session.
"""

from __future__ import annotations

import hmac
import inspect
import secrets
from collections.abc import Awaitable, Callable
from typing import Final

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

__all__ = [
    "TOKEN_COOKIE",
    "Authorize",
    "TokenAuthorization",
    "is_authorized",
]

TOKEN_COOKIE: Final = "dex_web_chat_token"
"""The cookie the login route sets; the page's requests and its EventSource send it."""

Authorize = Callable[[Request, str | None], bool | Awaitable[bool]]
"""``authorize(request, session_id)``: whether the caller may use the route (and that session)."""


async def is_authorized(authorize: Authorize, request: Request, session_id: str | None) -> bool:
    """Ask ``authorize``, awaiting it when it is async."""
    answer = authorize(request, session_id)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer is True


class TokenAuthorization:
    """One secret token for everything: a ``Authorization: Bearer`` header or the login cookie.

    Open ``/login?token=<token>`` once: the route checks the token, sets an HttpOnly, SameSite
    cookie and redirects to the page, whose requests then carry the cookie (an ``EventSource``
    cannot send headers). Scripts send the header instead.

    Args:
        token: The secret; a random one when omitted.

    Example:
        >>> authorization = TokenAuthorization()
        >>> app = create_web_chat_app(client, flow, authorization.authorize,
        ...                           routes=[authorization.login_route()])
    """

    def __init__(self, token: str | None = None) -> None:
        if token is not None and len(token) < 16:
            raise ValueError("the web chat token must be at least 16 characters long")
        self.token = token or secrets.token_urlsafe(24)

    def authorize(self, request: Request, session_id: str | None) -> bool:
        """Whether the request carries the token, as a bearer header or as the cookie."""
        del session_id  # one user: the token holder may use every session
        header = request.headers.get("authorization", "")
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() == "bearer" and self._matches(credentials.strip()):
            return True
        return self._matches(request.cookies.get(TOKEN_COOKIE, ""))

    def login_route(self) -> Route:
        """``GET /login?token=...``: checks the token, sets the cookie, redirects to the page."""
        return Route("/login", self._login, methods=["GET"])

    async def _login(self, request: Request) -> Response:
        if not self._matches(request.query_params.get("token", "")):
            return PlainTextResponse("wrong or missing token", status_code=401)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
        return response

    def _matches(self, candidate: str) -> bool:
        return bool(candidate) and hmac.compare_digest(candidate.encode(), self.token.encode())
