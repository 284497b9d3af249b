"""The error of a resume token that Dex refuses, raised before an event response starts."""

from __future__ import annotations

from dex_agents import DexAgentsError

__all__ = ["InvalidAgentEventResumeTokenError"]


class InvalidAgentEventResumeTokenError(DexAgentsError, ValueError):
    """Dex refused the resume token of a session's event stream; nothing was read.

    A token of another session, a forged or garbled one, or (on the local engine) one issued
    before the engine restarted. Answer 400, which stops the browser's ``EventSource``, and let
    the browser load the snapshot again, whose ``resume_token`` is valid.

    Attributes:
        session_id: The session whose stream was asked for.
        detail: What Dex answered.

    Example:
        >>> error = InvalidAgentEventResumeTokenError("session-42", "the token is not valid")
        >>> isinstance(error, ValueError), error.session_id
        (True, 'session-42')
        >>> print(error)
        Dex refused the event stream resume token of session 'session-42': the token is not
        valid. Load the session's snapshot again and open the stream from its resume_token.
    """

    def __init__(self, session_id: str, detail: str) -> None:
        super().__init__(
            f"Dex refused the event stream resume token of session {session_id!r}: {detail}. "
            "Load the session's snapshot again and open the stream from its resume_token."
        )
        self.session_id = session_id
        self.detail = detail
