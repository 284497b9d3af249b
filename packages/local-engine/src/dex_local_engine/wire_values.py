"""Helpers for ``dex.Value`` on the wire: every Value sent to a Worker has a kind set."""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb
from google.protobuf import struct_pb2

__all__ = ["ensure_value", "is_null", "value_text"]


def ensure_value(value: pb.Value | None) -> pb.Value:
    """A copy of ``value`` with a kind set (an unset Value becomes ``null_value``)."""
    result = pb.Value()
    if value is not None:
        result.CopyFrom(value)
    if result.WhichOneof("kind") is None:
        result.null_value = struct_pb2.NULL_VALUE  # type: ignore[assignment]
    return result


def is_null(value: pb.Value) -> bool:
    """Whether ``value`` is unset or ``null_value`` (an Attribute deletion)."""
    return value.WhichOneof("kind") in (None, "null_value")


def value_text(value: pb.Value) -> str:
    """Readable text of a value (a Flow failure reason), ``""`` for null."""
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "obj_value":
        payload = value.obj_value.payload
        try:
            text = payload.decode()
        except UnicodeDecodeError:
            return repr(payload)
        return text.strip('"') if text.startswith('"') else text
    if kind in (None, "null_value"):
        return ""
    return str(getattr(value, kind))
