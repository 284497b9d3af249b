"""What a deferred call's record carries for its tool Step, in ``tool_source_reference``.

Every call names the agent whose tool it is, so the tool Step finds the tool after a handoff. A
call that the SDK already answered inside ``RunModel`` (a tool of the agent's own MCP servers, a
handoff, a tool the model made up) carries that answer, so its tool Step only records it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from dex_agents import JsonObject, dump_json_text
from dex_agents.exceptions import StoredStateError

__all__ = ["CallReference"]


@dataclass(frozen=True)
class CallReference:
    """The agent of a deferred call, and the SDK's own answer when it already ran the call.

    Attributes:
        agent: The agent whose tool the model called.
        inline_output: The result the SDK produced inside ``RunModel``, recorded as it is.
        unknown_tool_error: The SDK's error for a tool the agent does not have; recorded failed.
        handoff_to: For a handoff that took effect, the agent that makes the next model call.
    """

    agent: str
    inline_output: str | None = None
    unknown_tool_error: str | None = None
    handoff_to: str | None = None

    def encode(self) -> str:
        """The ``tool_source_reference`` text."""
        value: JsonObject = {"agent": self.agent}
        if self.inline_output is not None:
            value["inline_output"] = self.inline_output
        if self.unknown_tool_error is not None:
            value["unknown_tool_error"] = self.unknown_tool_error
        if self.handoff_to is not None:
            value["handoff_to"] = self.handoff_to
        return dump_json_text(value)

    @classmethod
    def decode(cls, text: str | None) -> CallReference:
        """Read a record's ``tool_source_reference``.

        Raises:
            ValueError: When the text is not a reference of this adapter.
        """
        try:
            value = json.loads(text) if text is not None else None
        except ValueError:
            value = None
        if not isinstance(value, dict) or not isinstance(value.get("agent"), str):
            raise StoredStateError(
                f"tool call reference {(text or '')[:80]!r} was not written by "
                "dex-agents-openai-agents; the call cannot be run by this runner"
            )
        return cls(
            agent=value["agent"],
            inline_output=_optional_text(value, "inline_output"),
            unknown_tool_error=_optional_text(value, "unknown_tool_error"),
            handoff_to=_optional_text(value, "handoff_to"),
        )


def _optional_text(value: dict[str, object], key: str) -> str | None:
    text = value.get(key)
    return text if isinstance(text, str) else None
