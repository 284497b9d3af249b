"""An example browser chat on ``dex_agents.ui_stream``: a Starlette app and its support agent.

``create_web_chat_app`` serves the page, the snapshot and event routes and the session actions
(send, steer, stop, approve, reject, answer), each behind an authorization hook.
``build_web_chat_flow`` is the Stepwise support agent it talks to, and ``dex-agents-web-chat``
(``cli.main``) runs both on the embedded local engine.

Example:
    >>> authorization = TokenAuthorization()
    >>> app = create_web_chat_app(client, build_web_chat_flow(), authorization.authorize,
    ...                           routes=[authorization.login_route()])
"""

from dex_agents_web_chat._agent import (
    DEFAULT_WORD_DELAY,
    WEB_CHAT_FLOW_TYPE,
    ModelPause,
    RefundPause,
    StreamingScriptedModel,
    build_web_chat_flow,
    web_chat_model_reply,
)
from dex_agents_web_chat._app import MAX_REQUEST_BODY_BYTES, RECONNECT_DELAY, create_web_chat_app
from dex_agents_web_chat._authorization import (
    TOKEN_COOKIE,
    Authorize,
    TokenAuthorization,
    is_authorized,
)

__all__ = [
    "DEFAULT_WORD_DELAY",
    "MAX_REQUEST_BODY_BYTES",
    "RECONNECT_DELAY",
    "TOKEN_COOKIE",
    "WEB_CHAT_FLOW_TYPE",
    "Authorize",
    "ModelPause",
    "RefundPause",
    "StreamingScriptedModel",
    "TokenAuthorization",
    "build_web_chat_flow",
    "create_web_chat_app",
    "is_authorized",
    "web_chat_model_reply",
]
