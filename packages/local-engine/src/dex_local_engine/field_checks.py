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
from collections.abc import Callable
from dataclasses import dataclass
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
_VALUE = pb.Value.DESCRIPTOR.full_name
_NULL_FIELD: Any = pb.Value.DESCRIPTOR.fields_by_name["null_value"]
_NULL_VALUES = frozenset(_NULL_FIELD.enum_type.values_by_number)


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
    checker = _Checker(blob_references, is_known_blob)
    return checker.message(message, message.DESCRIPTOR.name)


@dataclass(frozen=True)
class _Plan:
    """What to look at in one message type (so a check costs no walk of what cannot fail).

    Field names and repeatedness are kept beside the descriptors: reading them off a descriptor
    costs a call into protobuf on every check.
    """

    scalars: tuple[tuple[FieldDescriptor, str, bool], ...]
    """Enum and number fields (not in a oneof), singular or repeated: (field, name, repeated)."""
    scalar_maps: tuple[tuple[FieldDescriptor, FieldDescriptor], ...]
    """Map fields with enum or number values: (the map field, its value field)."""
    children: tuple[tuple[str, bool], ...]
    """Message fields (singular or repeated) whose type has something to check: (name, repeated)."""
    child_maps: tuple[str, ...]
    """Map fields with message values whose type has something to check."""
    required: tuple[str, ...]
    route: tuple[str, str] | None

    @property
    def is_empty(self) -> bool:
        return (
            not (
                self.scalars
                or self.scalar_maps
                or self.children
                or self.child_maps
                or self.required
            )
            and self.route is None
        )


_PLANS: dict[str, _Plan] = {}


def _is_checked_scalar(field: FieldDescriptor) -> bool:
    if field.type == FieldDescriptor.TYPE_ENUM:
        return True
    return field.type in _NUMBER_TYPES and field.containing_oneof is None


def _needs_check(descriptor: Any) -> bool:
    return descriptor.full_name == _VALUE or not _plan(descriptor).is_empty


def _plan(descriptor: Any) -> _Plan:
    """The plan of a message type (a ``Descriptor``), made once."""
    plan = _PLANS.get(descriptor.full_name)
    if plan is not None:
        return plan
    # A placeholder first: message types may refer to themselves (StepOptions nests StepOptions).
    _PLANS[descriptor.full_name] = _Plan((), (), (), (), (), None)
    scalars: list[tuple[FieldDescriptor, str, bool]] = []
    scalar_maps: list[tuple[FieldDescriptor, FieldDescriptor]] = []
    children: list[tuple[str, bool]] = []
    child_maps: list[str] = []
    for field in descriptor.fields:
        entry = field.message_type
        if entry is None:
            if _is_checked_scalar(field):
                scalars.append((field, field.name, field.is_repeated))
        elif entry.GetOptions().map_entry:
            value_field = entry.fields_by_name["value"]
            value_type = value_field.message_type
            if value_type is None:
                if _is_checked_scalar(value_field):
                    scalar_maps.append((field, value_field))
            elif _needs_check(value_type) or value_type is descriptor:
                child_maps.append(field.name)
        elif _needs_check(entry) or entry is descriptor:
            children.append((field.name, field.is_repeated))
    plan = _Plan(
        tuple(scalars),
        tuple(scalar_maps),
        tuple(children),
        tuple(child_maps),
        _REQUIRED_NAMES.get(descriptor.full_name, ()),
        _FAILURE_ROUTES.get(descriptor.full_name),
    )
    _PLANS[descriptor.full_name] = plan
    return plan


class _Checker:
    def __init__(
        self, blob_references: BlobReferences, is_known_blob: Callable[[str], bool] | None
    ) -> None:
        self._blob_references = blob_references
        self._is_known_blob = is_known_blob

    def message(self, message: Message, path: str) -> str | None:
        if isinstance(message, pb.Value):
            return self._value(message, path)
        plan = _plan(message.DESCRIPTOR)
        for field, name, is_repeated in plan.scalars:
            content = getattr(message, name)
            values = list(content) if is_repeated else [content]
            problem = _scalar_problem(field, values, path, name)
            if problem is not None:
                return problem
        for field, value_field in plan.scalar_maps:
            values = list(getattr(message, field.name).values())
            problem = _scalar_problem(value_field, values, path, field.name)
            if problem is not None:
                return problem
        for name in plan.required:
            if not getattr(message, name):
                return f"{path}.{name} is empty"
        if plan.route is not None:
            policy, step_type = plan.route
            if getattr(
                message, policy
            ) == pb.EXECUTE_METHOD_FAILURE_POLICY_PROCEED_TO_CONFIGURED_STEP and not getattr(
                message, step_type
            ):
                return (
                    f"{path}.{step_type} is empty, but {path}.{policy} routes failures to that Step"
                )
        return self._children(message, plan, path)

    def _children(self, message: Message, plan: _Plan, path: str) -> str | None:
        for name, is_repeated in plan.children:
            if is_repeated:
                for index, child in enumerate(getattr(message, name)):
                    problem = self.message(child, f"{path}.{name}[{index}]")
                    if problem is not None:
                        return problem
            elif message.HasField(name):
                problem = self.message(getattr(message, name), f"{path}.{name}")
                if problem is not None:
                    return problem
        for name in plan.child_maps:
            for key, child in getattr(message, name).items():
                problem = self.message(child, f"{path}.{name}[{key!r}]")
                if problem is not None:
                    return problem
        return None

    def _value(self, value: pb.Value, path: str) -> str | None:
        kind = value.WhichOneof("kind")
        if kind == "null_value" and value.null_value not in _NULL_VALUES:
            return f"{path}.null_value is {value.null_value}, which is not a NullValue value"
        if kind not in _REFERENCE_KINDS:
            return None
        blob_id = str(getattr(value, kind))
        if self._blob_references is BlobReferences.REFUSED:
            return (
                f"{path} is a blob reference ({blob_id!r}); send the value itself (the engine "
                "stores large values as blobs on its own)"
            )
        if self._is_known_blob is None or not self._is_known_blob(blob_id):
            return f"{path} refers to blob {blob_id!r}, which the engine does not hold"
        return None


def _scalar_problem(
    field: FieldDescriptor, values: list[Any], parent: str, name: str
) -> str | None:
    """The problem of a scalar field's ``values`` (one, or each of a repeated or map field).

    ``parent.name`` is the field's path, built only for a problem.
    """
    enum = field.enum_type
    if field.type == FieldDescriptor.TYPE_ENUM and enum is not None:
        for value in values:
            if value not in enum.values_by_number:
                return f"{parent}.{name} is {value}, which is not a {enum.name} value"
        return None
    if field.type not in _NUMBER_TYPES or field.containing_oneof is not None:
        return None
    for value in values:
        if not math.isfinite(value):
            return f"{parent}.{name} must be a finite number, got {value}"
        if value < 0:
            return f"{parent}.{name} must not be negative, got {value}"
        if field.name.endswith("_seconds") and value > MAX_SECONDS:
            return f"{parent}.{name} must be at most {MAX_SECONDS} seconds, got {value}"
        if field.name == "backoff_coefficient" and 0 < value < 1:
            return f"{parent}.{name} must be at least 1 (or 0 for the default), got {value}"
    return None
