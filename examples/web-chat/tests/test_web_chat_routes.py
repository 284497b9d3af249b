"""The chat's routes over HTTP: every one refuses a caller without the token, and the session
routes answer bad input, unknown sessions and refused resume tokens clearly. Issue 36 case 9: a
body over the limit answers 413, an unknown session's event stream 404, and no response may be
framed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from dex_agents_web_chat import MAX_REQUEST_BODY_BYTES, TOKEN_COOKIE
from web_chat_test_support import BEARER, TOKEN, ChatStack, RunningChat, serving_chat

pytestmark = pytest.mark.asyncio(loop_scope="module")

_SESSION = "{session}"
ROUTES = (
    ("GET", "/", None),
    ("GET", "/static/chat.js", None),
    ("GET", "/static/chat.css", None),
    ("POST", "/sessions", {"message": "where is order 7?"}),
    ("GET", f"/sessions/{_SESSION}/snapshot", None),
    ("GET", f"/sessions/{_SESSION}/events", None),
    ("POST", f"/sessions/{_SESSION}/messages", {"text": "where is order 8?"}),
    ("POST", f"/sessions/{_SESSION}/steer", {"text": "where is order 8?"}),
    ("POST", f"/sessions/{_SESSION}/cancel", {"turn_id": "turn-1"}),
    ("POST", f"/sessions/{_SESSION}/interrupts/i-1/resolve", {"approved": True}),
    ("POST", f"/sessions/{_SESSION}/interrupts/i-1/answer", {"answer": "teapot"}),
    ("GET", "/login", None),
)
"""Every route of the app, with a body that would be accepted."""


@pytest_asyncio.fixture(loop_scope="module")
async def http(chat: RunningChat) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=chat.base_url, timeout=30) as client:
        yield client


async def _idle_session(stack: ChatStack, http: httpx.AsyncClient) -> str:
    started = await http.post("/sessions", json={"message": "where is order 7?"}, headers=BEARER)
    assert started.status_code == 200, started.text
    session_id = str(started.json()["session_id"])
    await stack.idle_snapshot(session_id, turns=1)
    return session_id


async def _request(
    http: httpx.AsyncClient,
    method: str,
    path: str,
    body: object,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    if path.endswith("/events"):
        # Only the status and headers: the body is an endless stream.
        async with http.stream(method, path, headers=headers) as response:
            return response
    return await http.request(method, path, json=body, headers=headers)


async def test_every_route_refuses_a_request_without_the_token(
    stack: ChatStack, http: httpx.AsyncClient
) -> None:
    session_id = await _idle_session(stack, http)
    before = await stack.sessions.get_agent_snapshot(session_id)
    wrong = {"Authorization": "Bearer not-the-token-of-this-chat"}
    for method, template, body in ROUTES:
        path = template.format(session=session_id)
        for headers in (None, wrong, {"Authorization": f"Basic {TOKEN}"}):
            response = await _request(http, method, path, body, headers)
            assert response.status_code == 401, (method, path, headers, response.text)
    cookie_with_wrong_token = httpx.Cookies({TOKEN_COOKIE: "not-the-token-of-this-chat"})
    async with httpx.AsyncClient(base_url=http.base_url, cookies=cookie_with_wrong_token) as other:
        for method, template, body in ROUTES:
            response = await _request(other, method, template.format(session=session_id), body)
            assert response.status_code == 401, (method, template)
    # Nothing reached the session.
    assert await stack.sessions.get_agent_snapshot(session_id) == before


async def test_every_route_serves_the_token_holder(
    stack: ChatStack, http: httpx.AsyncClient
) -> None:
    session_id = await _idle_session(stack, http)
    for method, template, body in ROUTES:
        path = template.format(session=session_id)
        response = await _request(http, method, path, body, BEARER)
        if path == "/login":
            assert response.status_code == 401  # it wants the token in its query
        else:
            assert response.status_code == 200, (method, path, response.text)
    events = await _request(http, "GET", f"/sessions/{session_id}/events", None, BEARER)
    assert events.headers["content-type"].startswith("text/event-stream")


async def test_the_login_link_sets_the_cookie_the_page_then_sends(
    stack: ChatStack, chat: RunningChat
) -> None:
    async with httpx.AsyncClient(base_url=chat.base_url) as browser_like:
        refused = await browser_like.get("/login", params={"token": "wrong-token-wrong-token"})
        assert refused.status_code == 401
        assert TOKEN_COOKIE not in browser_like.cookies
        login = await browser_like.get("/login", params={"token": TOKEN})
        assert login.status_code == 303 and login.headers["location"] == "/"
        set_cookie = login.headers["set-cookie"].lower()
        assert "httponly" in set_cookie and "samesite=strict" in set_cookie
        page = await browser_like.get("/")
        assert page.status_code == 200 and "<title>dex-agents web chat</title>" in page.text
        started = await browser_like.post("/sessions", json={})
        assert started.status_code == 200


async def test_the_hook_decides_per_session(stack: ChatStack, http: httpx.AsyncClient) -> None:
    mine = await _idle_session(stack, http)
    theirs = await _idle_session(stack, http)
    async with (
        serving_chat(stack, allows_session=lambda session_id: session_id == mine) as limited,
        httpx.AsyncClient(base_url=limited.base_url, headers=BEARER, timeout=30) as client,
    ):
        for method, template, body in ROUTES:
            if _SESSION not in template:
                continue
            allowed = await _request(client, method, template.format(session=mine), body)
            refused = await _request(client, method, template.format(session=theirs), body)
            assert allowed.status_code == 200, (method, template, allowed.text)
            assert refused.status_code == 401, (method, template)


async def test_a_refused_resume_token_answers_400_and_last_event_id_wins(
    stack: ChatStack, http: httpx.AsyncClient
) -> None:
    mine = await _idle_session(stack, http)
    theirs = await _idle_session(stack, http)
    their_token = (await http.get(f"/sessions/{theirs}/snapshot", headers=BEARER)).json()[
        "resume_token"
    ]
    my_token = (await http.get(f"/sessions/{mine}/snapshot", headers=BEARER)).json()["resume_token"]
    assert their_token and my_token
    events = f"/sessions/{mine}/events"
    for token in (their_token, "garbled-token"):
        async with http.stream("GET", events, params={"resume_token": token}, headers=BEARER) as (
            response
        ):
            assert response.status_code == 400
        async with http.stream(
            "GET", events, headers={**BEARER, "Last-Event-ID": token}
        ) as response:
            assert response.status_code == 400
    # A reconnect: the Last-Event-ID header wins over the URL's token.
    async with http.stream(
        "GET",
        events,
        params={"resume_token": "garbled-token"},
        headers={**BEARER, "Last-Event-ID": my_token},
    ) as response:
        assert response.status_code == 200
        chunks = response.aiter_text()
        assert await anext(chunks) == "retry: 1000\n\n"


async def test_bad_input_gets_a_clear_answer_and_changes_nothing(
    stack: ChatStack, http: httpx.AsyncClient
) -> None:
    session_id = await _idle_session(stack, http)
    before = await stack.sessions.get_agent_snapshot(session_id)
    messages = f"/sessions/{session_id}/messages"
    cases = (
        (await http.post(messages, content="text=hi", headers=BEARER), "application/json"),
        (await http.post(messages, json={"text": "  "}, headers=BEARER), "non-blank text"),
        (await http.post(messages, json=["hi"], headers=BEARER), "JSON object"),
        (
            await http.post(
                messages,
                content=b"{not json",
                headers={**BEARER, "Content-Type": "application/json"},
            ),
            "not JSON",
        ),
        (
            await http.post(
                f"/sessions/{session_id}/interrupts/i-1/resolve",
                json={"approved": "yes"},
                headers=BEARER,
            ),
            "true or false",
        ),
        (await http.get("/sessions/bad%20id/snapshot", headers=BEARER), "invalid session ID"),
    )
    for response, explanation in cases:
        assert response.status_code == 400, response.text
        assert explanation in response.text
    unknown = await http.get("/sessions/chat-nobody/snapshot", headers=BEARER)
    assert unknown.status_code == 404 and "chat-nobody" in unknown.text
    missing = await http.get("/static/secrets.txt", headers=BEARER)
    assert missing.status_code == 404
    assert await stack.sessions.get_agent_snapshot(session_id) == before


async def test_a_body_over_the_limit_answers_413_and_changes_nothing(
    stack: ChatStack, http: httpx.AsyncClient
) -> None:
    session_id = await _idle_session(stack, http)
    before = await stack.sessions.get_agent_snapshot(session_id)
    messages = f"/sessions/{session_id}/messages"
    for size in (MAX_REQUEST_BODY_BYTES + 1, 5_000_000, 30_000_000):
        response = await http.post(messages, json={"text": "x" * size}, headers=BEARER)
        assert response.status_code == 413, response.text
        assert f"over {MAX_REQUEST_BODY_BYTES} bytes" in response.text

    async def chunked() -> AsyncIterator[bytes]:
        yield b'{"text": "'
        for _ in range(40):
            yield b"y" * 65_536
        yield b'"}'

    # Without a Content-Length the chat stops reading at the limit too.
    response = await http.post(
        messages, content=chunked(), headers={**BEARER, "Content-Type": "application/json"}
    )
    assert response.status_code == 413, response.text
    started = await http.post("/sessions", json={"message": "z" * 2_000_000}, headers=BEARER)
    assert started.status_code == 413
    # Within the body limit but too large for the session to store: refused, nothing queued.
    refused = await http.post(messages, json={"text": "w" * 900_000}, headers=BEARER)
    assert refused.status_code == 200 and refused.json() == {"accepted": False}
    assert await stack.sessions.get_agent_snapshot(session_id) == before


async def test_an_unknown_sessions_event_stream_answers_404(
    stack: ChatStack, http: httpx.AsyncClient
) -> None:
    async with http.stream("GET", "/sessions/chat-nobody/events", headers=BEARER) as response:
        assert response.status_code == 404
        assert "chat-nobody" in (await response.aread()).decode()
    session_id = await _idle_session(stack, http)
    async with http.stream("GET", f"/sessions/{session_id}/events", headers=BEARER) as response:
        assert response.status_code == 200


async def test_no_response_may_be_framed(stack: ChatStack, http: httpx.AsyncClient) -> None:
    session_id = await _idle_session(stack, http)
    for method, template, body in ROUTES:
        path = template.format(session=session_id)
        for headers in (BEARER, None):
            response = await _request(http, method, path, body, headers)
            assert response.headers["content-security-policy"] == "frame-ancestors 'none'", path
            assert response.headers["x-frame-options"] == "DENY", path
