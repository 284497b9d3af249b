"""Field-by-field checks of what enters the engine, before anything of it is stored.

One walk over a request or a Worker result finds the first field the engine could not honour
later, so it is refused where it enters instead of failing or looping afterwards:

- an enum field holding a number its enum does not define (a close decision, a reject reason, a
  failure policy, an index type);
- a negative number (timeouts, intervals, attempts, page sizes: no field of the protocol means
  anything by a negative value), a double that is not finite, a ``*_seconds`` field beyond
  :data:`MAX_SECONDS`, a retry backoff coefficient between 0 and 1;
- an empty name where one is required: a Step movement's Step type, a failure route's Step type
  (``PROCEED_TO_CONFIGURED_STEP`` without one), a SubFlow's Flow type, an Attribute key, a
  Channel name;
- a blob reference (a ``Value`` naming an engine blob): refused outright from Clients (the engine
  gives Clients values, never blob IDs, so a reference from one is forged or stale), and from
  Workers accepted only when it names a blob the engine holds.

Example::

    problem = field_problem(request, BlobReferences.REFUSED)
    if problem is not None:
        raise errors.invalid_argument(problem)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from enum import StrEnum
from typing import Any

from dex.dexpb import dex_pb2 as pb
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

__all__ = ["MAX_SECONDS", "BlobReferences", "field_problem"]

MAX_SECONDS = 10_000_000_000
"""Largest value of a ``*_seconds`` field (about 317 years; beyond it time arithmetic overflows)."""


class BlobReferences(StrEnum):
    """Whether blob references may appear in the checked message."""

    REFUSED = "refused"
    """Clients: a reference is never legitimate."""
    KNOWN = "known"
    """Workers: a reference must name a blob the engine holds (``is_known_blob``)."""


_NUMBER_TYPES = frozenset(
    {
        FieldDescriptor.TYPE_INT32,
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_SINT32,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_SFIXED32,
        FieldDescriptor.TYPE_SFIXED64,
        FieldDescriptor.TYPE_DOUBLE,
        FieldDescriptor.TYPE_FLOAT,
    }
)
_REQUIRED_NAMES: dict[str, tuple[str, ...]] = {
    "dex.StepMovement": ("step_type",),
    "dex.SubFlowCondition": ("sub_flow_type",),
    "dex.AttributeWrite": ("key",),
    "dex.ChannelMessage": ("channel_name",),
}
_FAILURE_ROUTES: dict[str, tuple[str, str]] = {
    "dex.StepOptions": ("execute_failure_policy", "execute_failure_proceed_step_type"),
    "dex.FlowTimeoutHandlerOptions": ("failure_policy", "failure_proceed_step_type"),
}
_REFERENCE_KINDS = ("internal_blob_id_for_string_value", "internal_blob_id_for_obj_value")


def field_problem(
    message: Message,
    blob_references: BlobReferences,
    is_known_blob: Callable[[str], bool] | None = None,
) -> str | None:
    """A sentence naming the first field of ``message`` the engine refuses, or None.

    Args:
        message: a request or a Worker result.
        blob_references: whether blob references are refused or must be known.
        is_known_blob: for :attr:`BlobReferences.KNOWN`, whether the engine holds a blob ID.
    """
    root = message.DESCRIPTOR.name
    for path, problem_message in _walk(message, root):
        problem = _message_problem(problem_message, path, blob_references, is_known_blob)
        if problem is not None:
            return problem
    return None


def _walk(message: Message, path: str) -> Iterator[tuple[str, Message]]:
    """``message`` and every message inside it, each with its field path."""
    yield path, message
    for field, content in message.ListFields():
        entry = field.message_type
        if field.type != FieldDescriptor.TYPE_MESSAGE or entry is None:
            continue
        if entry.GetOptions().map_entry:
            if entry.fields_by_name["value"].type == FieldDescriptor.TYPE_MESSAGE:
                for key, child in content.items():
                    yield from _walk(child, f"{path}.{field.name}[{key!r}]")
        elif field.is_repeated:
            for index, child in enumerate(content):
                yield from _walk(child, f"{path}.{field.name}[{index}]")
        else:
            yield from _walk(content, f"{path}.{field.name}")


def _message_problem(
    message: Message,
    path: str,
    blob_references: BlobReferences,
    is_known_blob: Callable[[str], bool] | None,
) -> str | None:
    full_name = message.DESCRIPTOR.full_name
    for field, content in message.ListFields():
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            value_field = entry.fields_by_name["value"]
            values = list(content.values())
            problem = _scalar_problem(value_field, values, f"{path}.{field.name}")
        else:
            values = list(content) if field.is_repeated else [content]
            problem = _scalar_problem(field, values, f"{path}.{field.name}")
        if problem is not None:
            return problem
    if isinstance(message, pb.Value):
        return _value_problem(message, path, blob_references, is_known_blob)
    for name in _REQUIRED_NAMES.get(full_name, ()):
        if not getattr(message, name):
            return f"{path}.{name} is empty"
    route = _FAILURE_ROUTES.get(full_name)
    if route is not None:
        policy, step_type = route
        if getattr(
            message, policy
        ) == pb.EXECUTE_METHOD_FAILURE_POLICY_PROCEED_TO_CONFIGURED_STEP and not getattr(
            message, step_type
        ):
            return f"{path}.{step_type} is empty, but {path}.{policy} routes failures to that Step"
    return None


def _scalar_problem(field: FieldDescriptor, values: list[Any], path: str) -> str | None:
    """The problem of a scalar field's ``values`` (one, or each of a repeated or map field)."""
    enum = field.enum_type
    if field.type == FieldDescriptor.TYPE_ENUM and enum is not None:
        for value in values:
            if value not in enum.values_by_number:
                return f"{path} is {value}, which is not a {enum.name} value"
        return None
    if field.type not in _NUMBER_TYPES or field.containing_oneof is not None:
        return None
    for value in values:
        if not math.isfinite(value):
            return f"{path} must be a finite number, got {value}"
        if value < 0:
            return f"{path} must not be negative, got {value}"
        if field.name.endswith("_seconds") and value > MAX_SECONDS:
            return f"{path} must be at most {MAX_SECONDS} seconds, got {value}"
        if field.name == "backoff_coefficient" and 0 < value < 1:
            return f"{path} must be at least 1 (or 0 for the default), got {value}"
    return None


def _value_problem(
    value: pb.Value,
    path: str,
    blob_references: BlobReferences,
    is_known_blob: Callable[[str], bool] | None,
) -> str | None:
    kind = value.WhichOneof("kind")
    if kind not in _REFERENCE_KINDS:
        return None
    blob_id = str(getattr(value, kind))
    if blob_references is BlobReferences.REFUSED:
        return (
            f"{path} is a blob reference ({blob_id!r}); send the value itself (the engine "
            "stores large values as blobs on its own)"
        )
    if is_known_blob is None or not is_known_blob(blob_id):
        return f"{path} refers to blob {blob_id!r}, which the engine does not hold"
    return None
