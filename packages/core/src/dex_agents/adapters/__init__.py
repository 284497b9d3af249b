"""``dex_agents.adapters``: the kit for writing a runner for an agent framework (stable API).

A runner turns one framework's agent into the runner contract (``AgentFrameworkRunner`` and the
optional protocols). The kit holds what every runner does alike, so a runner holds only what is
framework-specific and every runner records the same outcome for the same situation:

- ``AdapterRunner``: the base class, with one tool-task router (``find_tool_task_poller``) and the
  compaction defaults (``estimate_input_tokens``, ``select_compaction_cutoff``), and
  ``check_tool_task_pollers`` for a runner that takes pollers by tool name;
- the error policy: ``unknown_tool_error``, ``invalid_arguments_error``,
  ``tool_arguments_object``, ``check_tool_arguments``, ``checked_tool_call`` (all three in a tool
  Step's order), ``UNKNOWN_TOOL_POLICY``, ``ToolTaskPollerMissingError``, and
  ``recorded_tool_result``, what the model sees for a call from its record, with
  ``tool_result_is_error``, whether it is flagged as an error,
  ``tool_question_answers``, what a tool that asked the user gets back, and
  ``agent_type_error``, the error for an agent of the wrong type;
- ``ModelCallCountState``: the run state of a runner that stores every message as it appears and
  keeps only the turn's model call count between model calls;
- ``ToolSourceRoutes``: the routes of a runner's ``ToolSource`` calls back to the source that
  built them (tool Step, task poll, cancellation), on any Worker;
- ``McpToolFactory``: one factory for the wrappers of MCP tools, given how the framework makes its
  tool type from an ``McpTool``, and the adapter's two public functions over it
  (``public_functions``);
- ``KeptDecodes``: stored framework items decoded once per process and handed out as copies, for a
  runner that rebuilds the framework's history from the stored messages in every model call, and
  ``fresh_copier``, the copy it makes by default, planned once per kept item;
- ``scenario_runner_getattr``: the ``__getattr__`` of an adapter's ``testing`` package that
  imports its scenario runner (and so ``dex_agents.testing``) only when asked for;
- ``owned_temp_directory``: a temporary directory for a runner's helper process (a framework's
  CLI), named for this process and removed by a later one if this process is killed first.

See "Writing an adapter" in the docs for the smallest runner that passes the shared suite.

Example:
    >>> from dex_agents.adapters import AdapterRunner, unknown_tool_error
    >>> class EchoRunner(AdapterRunner):
    ...     async def execute_deferred_tool_call(self, call):
    ...         raise unknown_tool_error(call.tool_call.tool_name)
"""

from dex_agents._model_call_count import ModelCallCountState
from dex_agents._owned_directories import owned_temp_directory
from dex_agents._tool_source_routes import (
    SourceTaskPoller,
    ToolSourceMissingError,
    ToolSourceRoutes,
)
from dex_agents.adapters._adapter_runner import AdapterRunner, check_tool_task_pollers
from dex_agents.adapters._agent_type import agent_type_error
from dex_agents.adapters._fresh_copies import fresh_copier
from dex_agents.adapters._kept_decodes import KeptDecodes
from dex_agents.adapters._mcp_tools import (
    McpTool,
    McpToolFactory,
    McpToolFunction,
    McpToolsFunction,
    McpToolSourceLike,
)
from dex_agents.adapters._recorded_results import recorded_tool_result, tool_result_is_error
from dex_agents.adapters._scenario_runner_getattr import scenario_runner_getattr
from dex_agents.adapters._tool_outcomes import (
    UNKNOWN_TOOL_POLICY,
    check_tool_arguments,
    checked_tool_call,
    invalid_arguments_error,
    tool_arguments_object,
    unknown_tool_error,
)
from dex_agents.adapters._tool_questions import tool_question_answers
from dex_agents.exceptions import ToolTaskPollerMissingError

__all__ = [
    "UNKNOWN_TOOL_POLICY",
    "AdapterRunner",
    "KeptDecodes",
    "McpTool",
    "McpToolFactory",
    "McpToolFunction",
    "McpToolSourceLike",
    "McpToolsFunction",
    "ModelCallCountState",
    "SourceTaskPoller",
    "ToolSourceMissingError",
    "ToolSourceRoutes",
    "ToolTaskPollerMissingError",
    "agent_type_error",
    "check_tool_arguments",
    "check_tool_task_pollers",
    "checked_tool_call",
    "fresh_copier",
    "invalid_arguments_error",
    "owned_temp_directory",
    "recorded_tool_result",
    "scenario_runner_getattr",
    "tool_arguments_object",
    "tool_question_answers",
    "tool_result_is_error",
    "unknown_tool_error",
]
