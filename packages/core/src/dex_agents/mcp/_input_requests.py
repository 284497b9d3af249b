"""An MCP server's input requests: which become a session question, and the text of the others.

A task in ``input_required`` that asks one form ``elicitation/create`` whose schema has a single
string field (with or without ``enum``) or a single boolean field becomes a question: its message,
the enum values or ``yes``/``no`` as choices. Anything else cannot be answered by a session yet.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from dex_agents import QuestionAnswer, QuestionResolution, dump_json_text

__all__ = [
    "INPUT_REQUEST_ERROR_PREFIX",
    "ElicitationQuestion",
    "FieldKind",
    "elicitation_question",
    "input_request_error",
    "input_response",
    "request_fingerprint",
]

INPUT_REQUEST_ERROR_PREFIX: Final = (
    "the MCP server asked for input that this agent session cannot provide yet"
)
"""Start of the error of a call whose server asked for input the session cannot give."""

_YES_NO: Final = ("yes", "no")


class FieldKind(StrEnum):
    """What a question's single field takes: any text, one of its choices, or yes/no."""

    TEXT = "text"
    CHOICE = "choice"
    BOOLEAN = "boolean"


@dataclass(frozen=True)
class ElicitationQuestion:
    """One elicitation the session asks as a question."""

    request_key: str
    fingerprint: str
    message: str
    field_name: str
    kind: FieldKind
    choices: tuple[str, ...]

    @property
    def allows_free_text(self) -> bool:
        """Only a string field without ``enum`` takes any text."""
        return self.kind is FieldKind.TEXT


def request_fingerprint(request: Mapping[str, Any]) -> str:
    """A digest of one input request, so an answer only ever reaches the identical request."""
    return hashlib.sha256(dump_json_text(dict(request)).encode("utf-8")).hexdigest()[:16]


def _describe(request: Mapping[str, Any]) -> str:
    method = request.get("method")
    params = request.get("params")
    params = params if isinstance(params, Mapping) else {}
    if method == "elicitation/create":
        message = params.get("message")
        if params.get("mode") == "url":
            return f"a visit to {params.get('url')!s} ({message!s})"
        return f"an answer to '{message!s}'"
    if method == "sampling/createMessage":
        return "a model completion (sampling/createMessage)"
    if method == "roots/list":
        return "the client's roots (roots/list)"
    return f"a {method!s} request"


def input_request_error(requests: Mapping[str, Mapping[str, Any]]) -> str:
    """``the MCP server asked for input that this agent session cannot provide yet (...)``.

    Example:
        >>> input_request_error({"a": {"method": "elicitation/create",
        ...     "params": {"message": "Which account?", "requestedSchema": {}}}})
        "the MCP server asked for input that this agent session cannot provide yet (an answer to 'Which account?')"
    """
    described = ", ".join(_describe(requests[key]) for key in sorted(requests)) or "no request"
    return f"{INPUT_REQUEST_ERROR_PREFIX} ({described})"


def elicitation_question(
    requests: Mapping[str, Mapping[str, Any]],
) -> ElicitationQuestion | None:
    """The question of a single form elicitation with one string or boolean field, else None."""
    if len(requests) != 1:
        return None
    ((key, request),) = requests.items()
    if request.get("method") != "elicitation/create":
        return None
    params = request.get("params")
    if not isinstance(params, Mapping) or params.get("mode", "form") != "form":
        return None
    message, schema = params.get("message"), params.get("requestedSchema")
    if not isinstance(message, str) or not message.strip() or not isinstance(schema, Mapping):
        return None
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or len(properties) != 1:
        return None
    ((field_name, field_schema),) = properties.items()
    if not isinstance(field_schema, Mapping):
        return None
    kind, choices = _field_kind(field_schema)
    if kind is None:
        return None
    return ElicitationQuestion(
        key, request_fingerprint(request), message, str(field_name), kind, choices
    )


def _field_kind(field_schema: Mapping[str, Any]) -> tuple[FieldKind | None, tuple[str, ...]]:
    field_type = field_schema.get("type")
    if field_type == "boolean":
        return FieldKind.BOOLEAN, _YES_NO
    if field_type != "string":
        return None, ()
    enum = field_schema.get("enum")
    one_of = field_schema.get("oneOf")
    if enum is None and isinstance(one_of, list) and one_of:
        # A titled enum (2025-11-25): each option a {"const", "title"}; the consts are the choices.
        enum = [option.get("const") if isinstance(option, Mapping) else None for option in one_of]
    if enum is None:
        return FieldKind.TEXT, ()
    if isinstance(enum, list) and enum and all(isinstance(value, str) for value in enum):
        return FieldKind.CHOICE, tuple(enum)
    return None, ()


def input_response(question: ElicitationQuestion, answer: QuestionAnswer) -> dict[str, Any]:
    """The elicitation result of a resolved question: ``accept`` with the answer, ``decline``
    for a declined question, ``cancel`` for a passed deadline."""
    if answer.resolution is QuestionResolution.DECLINED:
        return {"action": "decline"}
    if answer.resolution is QuestionResolution.DEADLINE_PASSED:
        return {"action": "cancel"}
    text = answer.answer or ""
    value: str | bool = text == "yes" if question.kind is FieldKind.BOOLEAN else text
    return {"action": "accept", "content": {question.field_name: value}}
