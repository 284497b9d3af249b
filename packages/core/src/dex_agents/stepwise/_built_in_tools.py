"""Adapter to the core's built-in tool definitions.

ADAPTER: the core module that defines the built-in tools (``dex_agents.agent_built_in_tools``
with ``BuiltInTool`` and ``BUILT_IN_TOOL_DEFINITIONS``) is written in a later issue. Until it
exists, no built-in tool definition is offered; the names of enabled built-in tools are still
reserved. Once it exists, this module reads the definitions from it and nothing else changes.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping

from dex_agents.stepwise._json_schema import JsonSchema
from dex_agents.stepwise.model_client import ModelToolDefinition

__all__ = ["built_in_tool_definitions"]

_BUILT_IN_TOOLS_MODULE = "dex_agents.agent_built_in_tools"


def _all_definitions() -> Mapping[str, ModelToolDefinition]:
    try:
        module = importlib.import_module(_BUILT_IN_TOOLS_MODULE)
    except ModuleNotFoundError:
        return {}
    definitions = getattr(module, "BUILT_IN_TOOL_DEFINITIONS", ())
    if isinstance(definitions, Mapping):
        definitions = definitions.values()
    converted: dict[str, ModelToolDefinition] = {}
    for definition in definitions:
        name = str(definition.name)
        parameters = getattr(definition, "parameters", None)
        if parameters is None:
            parameters = getattr(definition, "parameters_schema", {})
        schema: JsonSchema = dict(parameters)
        converted[name] = ModelToolDefinition(
            name, str(getattr(definition, "description", "")), schema
        )
    return converted


def built_in_tool_definitions(enabled: Iterable[str]) -> tuple[ModelToolDefinition, ...]:
    """The definitions of the enabled built-in tools that the core defines, in the core's order."""
    wanted = {str(name) for name in enabled}
    return tuple(definition for name, definition in _all_definitions().items() if name in wanted)
