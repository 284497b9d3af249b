"""The chat's Starlette app: the page, the snapshot and event routes, and the session actions.

| Route | What it does |
|---|---|
| ``GET /`` and ``GET /static/<file>`` | The page: plain HTML, CSS and JavaScript |
| ``POST /sessions`` | Starts a session, ``{"session_id": ...}`` |
| ``GET /sessions/<id>/snapshot`` | ``read_agent_event_stream_snapshot(...).to_json()`` |
| ``GET /sessions/<id>/events`` | The SSE stream from ``Last-Event-ID`` or ``?resume_token=`` |
| ``POST /sessions/<id>/messages`` | ``send_user_message``, ``{"text": ...}`` |
| ``POST /sessions/<id>/steer`` | ``steer_user_message``, ``{"text": ...}`` |
| ``POST /sessions/<id>/cancel`` | ``cancel_turn``, ``{"turn_id": ...}`` |
| ``POST /sessions/<id>/interrupts/<interrupt>/resolve`` | ``resolve_interrupt``, ``{"approved": ..., "rejection_message": ...}`` |
| ``POST /sessions/<id>/interrupts/<interrupt>/answer`` | ``answer_question``, ``{"answer": ...}`` |

Every route calls the ``authorize`` hook first and answers 401 when it refuses. The actions
answer ``{"accepted": <the RPC's bool>}``. A request body over :data:`MAX_REQUEST_BODY_BYTES`
answers 413, and every response forbids framing (``Content-Security-Policy: frame-ancestors
'none'``, ``X-Frame-Options: DENY``), so no other page can put the Approve button under a click.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from datetime import timedelta
from importlib import resources
from typing import Any, Final

from dex import (
    AsyncClient,
    ChannelMessageNotFoundError,
    Flow,
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
)
from dex_agents import AgentSessionClient
from dex_agents.ui_stream import (
    AGENT_EVENT_STREAM_HEADERS,
    DEFAULT_POLL_TIMEOUT,
    InvalidAgentEventResumeTokenError,
    read_agent_event_stream_snapshot,
    stream_agent_event_frames,
)
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dex_agents_web_chat._authorization import Authorize, is_authorized

__all__ = ["MAX_REQUEST_BODY_BYTES", "RECONNECT_DELAY", "create_web_chat_app"]

RECONNECT_DELAY: Final = timedelta(seconds=1)
"""The SSE ``retry`` the event route sends: how soon a dropped EventSource reconnects."""

_SESSION_ID: Final = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
_STATIC_FILES: Final = {
    "chat.js": "text/javascript; charset=utf-8",
    "chat.css": "text/css; charset=utf-8",
}
MAX_REQUEST_BODY_BYTES: Final = 1024 * 1024
"""Largest request body the chat reads (1 MiB); a larger one answers 413. A message the session
can store (``MAX_STORED_MESSAGE_BYTES`` as stored) always fits."""

_NO_STORE: Final = {"Cache-Control": "no-store"}
_NO_FRAMING: Final = (
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"x-frame-options", b"DENY"),
)

_Handler = Callable[[Request], Awaitable[Response]]


class _BadRequest(Exception):
    """The request cannot be served as sent; the text says why."""


class _UnknownSession(Exception):
    """No session of the chat's Flow type has the ID the route names."""


class _BodyTooLarge(Exception):
    """The request body is over ``MAX_REQUEST_BODY_BYTES``."""


class _NoFramingMiddleware:
    """Adds the headers that forbid framing to every response, streams included."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def send_without_framing(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *_NO_FRAMING]}
            await send(message)

        await self._app(scope, receive, send_without_framing)


def create_web_chat_app(
    client: AsyncClient,
    flow: Flow[Any],
    authorize: Authorize,
    *,
    routes: Sequence[BaseRoute] = (),
    poll_timeout: timedelta = DEFAULT_POLL_TIMEOUT,
    max_event_stream_duration: timedelta | None = None,
) -> Starlette:
    """The chat app for sessions of ``flow``, served through ``client``.

    Args:
        client: An ``AsyncClient`` whose Registry holds ``flow``.
        flow: The session Flow, such as ``build_web_chat_flow()``.
        authorize: Called by every route with the request and the session ID it names
            (``None`` for the page and for starting a session); ``False`` answers 401.
        routes: More routes, such as ``TokenAuthorization.login_route()``.
        poll_timeout: How long each Dex long poll of an event stream waits before a keep-alive.
        max_event_stream_duration: End each event response after this long (the browser
            reconnects with ``Last-Event-ID``), as a proxy that recycles connections would.

    Example:
        >>> app = create_web_chat_app(client, build_web_chat_flow(), authorization.authorize)
    """
    chat = _WebChat(client, flow, authorize, poll_timeout, max_event_stream_duration)
    session = "/sessions/{session_id}"
    interrupt = f"{session}/interrupts/{{interrupt_id}}"
    return Starlette(
        middleware=[Middleware(_NoFramingMiddleware)],
        routes=[
            *routes,
            Route("/", chat.guarded(chat.page, session_route=False), methods=["GET"]),
            Route(
                "/static/{name}", chat.guarded(chat.static, session_route=False), methods=["GET"]
            ),
            Route("/sessions", chat.guarded(chat.start, session_route=False), methods=["POST"]),
            Route(f"{session}/snapshot", chat.guarded(chat.snapshot), methods=["GET"]),
            Route(f"{session}/events", chat.guarded(chat.events), methods=["GET"]),
            Route(f"{session}/messages", chat.guarded(chat.send), methods=["POST"]),
            Route(f"{session}/steer", chat.guarded(chat.steer), methods=["POST"]),
            Route(f"{session}/cancel", chat.guarded(chat.cancel), methods=["POST"]),
            Route(f"{interrupt}/resolve", chat.guarded(chat.resolve), methods=["POST"]),
            Route(f"{interrupt}/answer", chat.guarded(chat.answer), methods=["POST"]),
        ],
    )


class _WebChat:
    def __init__(
        self,
        client: AsyncClient,
        flow: Flow[Any],
        authorize: Authorize,
        poll_timeout: timedelta,
        max_event_stream_duration: timedelta | None,
    ) -> None:
        self._client = client
        self._flow = flow
        self._sessions = AgentSessionClient(client, flow)
        self._authorize = authorize
        self._poll_timeout = poll_timeout
        self._max_stream_seconds = (
            None if max_event_stream_duration is None else max_event_stream_duration.total_seconds()
        )

    def guarded(self, handler: _Handler, *, session_route: bool = True) -> _Handler:
        """``handler`` behind the authorization hook, with the chat's error answers."""

        async def guarded_handler(request: Request) -> Response:
            session_id = request.path_params.get("session_id") if session_route else None
            if not await is_authorized(self._authorize, request, session_id):
                return PlainTextResponse(
                    "not authorized: open the login link the server printed",
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
            try:
                if session_id is not None and not _SESSION_ID.match(session_id):
                    raise _BadRequest(f"invalid session ID {session_id!r}")
                return await handler(request)
            except _BadRequest as problem:
                return PlainTextResponse(str(problem), status_code=400)
            except _BodyTooLarge:
                return PlainTextResponse(
                    f"the request body is over {MAX_REQUEST_BODY_BYTES} bytes", status_code=413
                )
            except (FlowNotFoundError, FlowNotActiveOrNotFoundError, _UnknownSession):
                return PlainTextResponse(f"no session {session_id!r}", status_code=404)
            except ChannelMessageNotFoundError:
                # The session took the message while the RPC ran; the page reloads and retries.
                return JSONResponse({"accepted": False})

        return guarded_handler

    async def page(self, request: Request) -> Response:
        return Response(_static_text("index.html"), media_type="text/html", headers=_NO_STORE)

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        media_type = _STATIC_FILES.get(name)
        if media_type is None:
            return PlainTextResponse("not found", status_code=404)
        return Response(_static_text(name), media_type=media_type, headers=_NO_STORE)

    async def start(self, request: Request) -> Response:
        body = await _json_body(request)
        message = _optional_text(body, "message")
        session_id = f"chat-{secrets.token_hex(6)}"
        await self._sessions.start_session(session_id, message or "")
        return JSONResponse({"session_id": session_id})

    async def snapshot(self, request: Request) -> Response:
        value = await read_agent_event_stream_snapshot(
            self._client, self._flow, request.path_params["session_id"]
        )
        return JSONResponse(value.to_json(), headers=_NO_STORE)

    async def events(self, request: Request) -> Response:
        resume_token = request.headers.get("last-event-id") or request.query_params.get(
            "resume_token", ""
        )
        await self._require_session(request.path_params["session_id"])
        try:
            frames = await stream_agent_event_frames(
                self._client,
                self._flow,
                request.path_params["session_id"],
                resume_token=resume_token,
                poll_timeout=self._poll_timeout,
            )
        except InvalidAgentEventResumeTokenError:
            # Stops the EventSource; the page loads the snapshot again.
            return Response(status_code=400)
        return StreamingResponse(self._event_body(frames), headers=dict(AGENT_EVENT_STREAM_HEADERS))

    async def _require_session(self, session_id: str) -> None:
        """Raise ``FlowNotFoundError`` or ``_UnknownSession`` (both answered 404) unless a session
        of this chat's Flow type has this ID: an unknown session's event stream would only ever
        keep alive."""
        info = await self._client.describe_flow(session_id)
        if info.flow_type != self._flow.get_flow_type():
            raise _UnknownSession

    async def send(self, request: Request) -> Response:
        text = _required_text(await _json_body(request), "text")
        accepted = await self._sessions.send_user_message(_session(request), text)
        return JSONResponse({"accepted": accepted})

    async def steer(self, request: Request) -> Response:
        text = _required_text(await _json_body(request), "text")
        accepted = await self._sessions.steer_user_message(_session(request), text)
        return JSONResponse({"accepted": accepted})

    async def cancel(self, request: Request) -> Response:
        turn_id = _required_text(await _json_body(request), "turn_id")
        accepted = await self._sessions.cancel_turn(_session(request), turn_id)
        return JSONResponse({"accepted": accepted})

    async def resolve(self, request: Request) -> Response:
        body = await _json_body(request)
        approved = body.get("approved")
        if not isinstance(approved, bool):
            raise _BadRequest('"approved" must be true or false')
        accepted = await self._sessions.resolve_interrupt(
            _session(request),
            request.path_params["interrupt_id"],
            approved=approved,
            rejection_message=_optional_text(body, "rejection_message"),
        )
        return JSONResponse({"accepted": accepted})

    async def answer(self, request: Request) -> Response:
        answer = _required_text(await _json_body(request), "answer")
        accepted = await self._sessions.answer_question(
            _session(request), request.path_params["interrupt_id"], answer
        )
        return JSONResponse({"accepted": accepted})

    async def _event_body(self, frames: AsyncGenerator[str, None]) -> AsyncGenerator[str, None]:
        yield f"retry: {int(RECONNECT_DELAY.total_seconds() * 1000)}\n\n"
        if self._max_stream_seconds is None:
            async for frame in frames:
                yield frame
            return
        deadline = asyncio.get_running_loop().time() + self._max_stream_seconds
        try:
            while True:
                # The timeout covers only the read, never a yield, which runs the server's send.
                try:
                    async with asyncio.timeout_at(deadline):
                        frame = await anext(frames)
                except TimeoutError:
                    return  # ends the response: the browser reconnects with Last-Event-ID
                yield frame
        finally:
            await frames.aclose()


def _session(request: Request) -> str:
    return str(request.path_params["session_id"])


async def _json_body(request: Request) -> dict[str, object]:
    # JSON only: a cross-site form post cannot send it without a CORS preflight.
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise _BadRequest("send the request body as application/json")
    try:
        body = json.loads(await _limited_body(request) or b"{}")
    except json.JSONDecodeError as error:
        raise _BadRequest(f"the request body is not JSON: {error}") from None
    if not isinstance(body, dict):
        raise _BadRequest("the request body must be a JSON object")
    return body


async def _limited_body(request: Request) -> bytes:
    """The body, read only up to ``MAX_REQUEST_BODY_BYTES``: a declared or streamed larger one
    raises ``_BodyTooLarge`` before more is read."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_REQUEST_BODY_BYTES:
        raise _BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_REQUEST_BODY_BYTES:
            raise _BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _required_text(body: dict[str, object], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value.strip():
        raise _BadRequest(f"{name!r} must be non-blank text")
    return value


def _optional_text(body: dict[str, object], name: str) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _BadRequest(f"{name!r} must be text")
    return value


def _static_text(name: str) -> str:
    return (resources.files("dex_agents_web_chat") / "static" / name).read_text(encoding="utf-8")
