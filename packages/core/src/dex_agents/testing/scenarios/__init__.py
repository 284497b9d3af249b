"""The shared scenario agent, and how a runner joins the scenario suite.

The repository's ``tests-shared`` suite runs one set of scenarios (chat, parallel tools, approvals,
questions, tool tasks, steering, cancellation, Worker kills at exact points, turn failures, plan
mode, session settings, spend limits) under every installed runner. The agent those scenarios talk
to is described here once: :class:`ScenarioAgentSpec` lists its tools with their effects, and
:func:`scripted_reply` is its deterministic model. A runner package builds that agent in its own
framework and registers a :class:`ScenarioRunner` (see ``scenario_runner``), so every guarantee is
proven for every framework.

Example:
    >>> def build_my_flow(spec: ScenarioAgentSpec) -> AgentSessionFlow:
    ...     ...  # offer spec.tools, answer model calls with scripted_reply, run run_scenario_tool
    >>> SCENARIO_RUNNER = ScenarioRunner("my-framework", build_flow=build_my_flow)
"""

from dex_agents.testing.scenarios._stepwise_scenario_runner import (
    StepwiseReportSource as ScenarioReportSource,
)
from dex_agents.testing.scenarios.scenario_agent import (
    APPROVAL_DEADLINE,
    BROKEN_TOOL_ERROR,
    DEADLINE_FLOW_TYPE,
    INSTRUCTIONS,
    KILL_WORKER_GATE,
    MAIN_FLOW_TYPE,
    MODEL_FAILURE,
    MODEL_INVOCATION,
    PLAN_FLOW_TYPE,
    QUESTION_BUILT_IN_TOOLS,
    SCENARIO_TOOLS,
    SPEND_REFUSAL_REASON,
    ScenarioAgentSpec,
    ScenarioCall,
    ScenarioCommand,
    ScenarioReply,
    ScenarioSpendLimit,
    ScenarioTool,
    ScenarioToolCall,
    ScenarioToolError,
    invocation_log,
    model_gate_name,
    refuse_model_calls,
    run_scenario_tool,
    scenario_agent_specs,
    scripted_reply,
)
from dex_agents.testing.scenarios.scenario_questions import (
    CONFIRM_CHOICES,
    CONFIRM_QUESTION,
    CONFIRM_TOOL,
    REPORT_POLL_INTERVAL_SECONDS,
    REPORT_POLL_INVOCATION,
    REPORT_QUESTION,
    REPORT_QUESTION_ID,
    REPORT_TOOL,
    ScenarioQuestion,
    ScenarioTaskRunning,
    poll_report,
    poll_report_task,
    report_deliveries,
    report_job_ids,
    run_confirm_tool,
    scenario_input_requested,
    start_report,
    stop_at_report_gate,
)
from dex_agents.testing.scenarios.scenario_runner import (
    SCENARIO_RUNNERS_ENTRY_POINT_GROUP,
    SCENARIO_RUNNERS_ENV,
    ScenarioFeature,
    ScenarioRunner,
    UnknownScenarioRunnerError,
    build_scenario_flows,
    load_scenario_runner,
    scenario_runner_names,
)

__all__ = [
    "APPROVAL_DEADLINE",
    "BROKEN_TOOL_ERROR",
    "CONFIRM_CHOICES",
    "CONFIRM_QUESTION",
    "CONFIRM_TOOL",
    "DEADLINE_FLOW_TYPE",
    "INSTRUCTIONS",
    "KILL_WORKER_GATE",
    "MAIN_FLOW_TYPE",
    "MODEL_FAILURE",
    "MODEL_INVOCATION",
    "PLAN_FLOW_TYPE",
    "QUESTION_BUILT_IN_TOOLS",
    "REPORT_POLL_INTERVAL_SECONDS",
    "REPORT_POLL_INVOCATION",
    "REPORT_QUESTION",
    "REPORT_QUESTION_ID",
    "REPORT_TOOL",
    "SCENARIO_RUNNERS_ENTRY_POINT_GROUP",
    "SCENARIO_RUNNERS_ENV",
    "SCENARIO_TOOLS",
    "SPEND_REFUSAL_REASON",
    "ScenarioAgentSpec",
    "ScenarioCall",
    "ScenarioCommand",
    "ScenarioFeature",
    "ScenarioQuestion",
    "ScenarioReply",
    "ScenarioReportSource",
    "ScenarioRunner",
    "ScenarioSpendLimit",
    "ScenarioTaskRunning",
    "ScenarioTool",
    "ScenarioToolCall",
    "ScenarioToolError",
    "UnknownScenarioRunnerError",
    "build_scenario_flows",
    "invocation_log",
    "load_scenario_runner",
    "model_gate_name",
    "poll_report",
    "poll_report_task",
    "refuse_model_calls",
    "report_deliveries",
    "report_job_ids",
    "run_confirm_tool",
    "run_scenario_tool",
    "scenario_agent_specs",
    "scenario_input_requested",
    "scenario_runner_names",
    "scripted_reply",
    "start_report",
    "stop_at_report_gate",
]
