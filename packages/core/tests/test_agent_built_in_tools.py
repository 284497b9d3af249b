"""Built-in tools: definitions, argument rules with their exact failure texts, and results."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dex_agents import (
    BUILT_IN_TOOL_DEFINITIONS,
    STEERED_TOOL_RESULT,
    TURN_CANCELLED_TOOL_RESULT,
    AgentTodo,
    BuiltInTool,
    BuiltInToolDefinition,
    ConfigurationError,
    QuestionResolution,
    TodoStatus,
)
from dex_agents._built_in_tools import (
    DEFAULT_MAX_DURABLE_WAIT,
    QUESTION_DEADLINE_PASSED_RESULT,
    QUESTION_DECLINED_RESULT,
    WRITE_TODOS_CALLED_MORE_THAN_ONCE_ERROR,
    AskUserArguments,
    BuiltInToolArgumentsError,
    DurableWaitArguments,
    WriteTodosArguments,
    ask_user_answered_result,
    ask_user_result,
    built_in_tool_definitions,
    durable_wait_result,
    enabled_built_in_tool,
    is_allowed_question_answer,
    max_durable_wait_seconds,
    parse_ask_user_arguments,
    parse_built_in_tool_arguments,
    parse_built_in_tools,
    parse_durable_wait_arguments,
    parse_write_todos_arguments,
    remaining_wait_seconds,
    repeated_write_todos_call_ids,
)

YEAR_SECONDS = 365 * 24 * 60 * 60


def _error_of(call: object) -> str:
    assert callable(call)
    with pytest.raises(BuiltInToolArgumentsError) as caught:
        call()
    return str(caught.value)


# Definitions


def test_built_in_tool_names_are_the_documented_ones() -> None:
    assert [tool.value for tool in BuiltInTool] == ["ask_user", "durable_wait", "write_todos"]
    assert [definition.name for definition in BUILT_IN_TOOL_DEFINITIONS] == list(BuiltInTool)


@pytest.mark.parametrize("definition", BUILT_IN_TOOL_DEFINITIONS, ids=lambda d: d.name.value)
def test_every_definition_is_strict_schema_friendly(definition: BuiltInToolDefinition) -> None:
    assert definition.description.strip()
    _assert_strict_object(definition.parameters)
    # The schema is plain JSON, so any provider client can send it.
    assert json.loads(json.dumps(definition.parameters)) == definition.parameters


def _assert_strict_object(schema: object) -> None:
    assert isinstance(schema, dict)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    properties = schema["properties"]
    assert isinstance(properties, dict)
    assert schema["required"] == list(properties)
    for property_schema in properties.values():
        assert isinstance(property_schema, dict)
        if property_schema.get("type") == "object":
            _assert_strict_object(property_schema)
        items = property_schema.get("items")
        if isinstance(items, dict) and items.get("type") == "object":
            _assert_strict_object(items)


def _properties(definition: BuiltInToolDefinition) -> Any:
    # A JSON round trip types the nested schema as Any, so the test can index into it.
    return json.loads(json.dumps(definition.parameters))["properties"]


def test_optional_arguments_are_nullable_and_required_ones_are_not() -> None:
    ask_user, durable_wait, write_todos = (_properties(d) for d in BUILT_IN_TOOL_DEFINITIONS)
    assert ask_user["question"]["type"] == "string"
    assert ask_user["choices"]["type"] == ["array", "null"]
    assert ask_user["choices"]["items"] == {"type": "string"}
    assert ask_user["allows_free_text"]["type"] == ["boolean", "null"]
    assert durable_wait["duration_seconds"]["type"] == "integer"
    assert durable_wait["reason"]["type"] == "string"
    status = write_todos["todos"]["items"]["properties"]["status"]
    assert status == {**status, "type": "string", "enum": ["pending", "in_progress", "completed"]}
    assert write_todos["todos"]["items"]["properties"]["content"]["type"] == "string"


def test_definitions_filter_by_enabled_names_in_canonical_order() -> None:
    names = [d.name for d in built_in_tool_definitions({"write_todos", "ask_user", "search"})]
    assert names == [BuiltInTool.ASK_USER, BuiltInTool.WRITE_TODOS]
    assert built_in_tool_definitions(()) == ()
    assert len(built_in_tool_definitions(set(BuiltInTool))) == 3


def test_definition_copies_do_not_share_the_schema() -> None:
    copy = built_in_tool_definitions({"ask_user"})[0]
    copy.parameters["required"] = []
    assert BUILT_IN_TOOL_DEFINITIONS[0].parameters["required"] == [
        "question",
        "choices",
        "allows_free_text",
    ]
    as_json = BUILT_IN_TOOL_DEFINITIONS[1].to_json()
    assert as_json["name"] == "durable_wait"
    assert as_json["parameters"] == BUILT_IN_TOOL_DEFINITIONS[1].parameters


# Reserved names


def test_an_enabled_name_is_reserved_and_a_disabled_one_is_ordinary() -> None:
    assert enabled_built_in_tool("ask_user", {"ask_user"}) is BuiltInTool.ASK_USER
    assert enabled_built_in_tool("ask_user", {BuiltInTool.ASK_USER}) is BuiltInTool.ASK_USER
    assert enabled_built_in_tool("ask_user", {"durable_wait"}) is None
    assert enabled_built_in_tool("write_todos", frozenset()) is None
    assert enabled_built_in_tool("search", set(BuiltInTool)) is None


def test_parse_built_in_tools_names_an_unknown_tool() -> None:
    assert parse_built_in_tools(["ask_user", "write_todos"]) == {
        BuiltInTool.ASK_USER,
        BuiltInTool.WRITE_TODOS,
    }
    with pytest.raises(
        ConfigurationError, match="unknown built-in tool 'ask'; the built-in tools are"
    ):
        parse_built_in_tools(["ask"])
    with pytest.raises(ConfigurationError, match="not the string"):
        parse_built_in_tools("ask_user")


# ask_user


def test_ask_user_reads_every_argument() -> None:
    parsed = parse_ask_user_arguments(
        '{"question": "Which region?", "choices": ["eu", "us"], "allows_free_text": false}'
    )
    assert parsed == AskUserArguments("Which region?", ("eu", "us"), False)


def test_ask_user_null_optional_arguments_mean_absent() -> None:
    expected = AskUserArguments("Why?", (), True)
    assert parse_ask_user_arguments({"question": "Why?"}) == expected
    assert (
        parse_ask_user_arguments({"question": "Why?", "choices": None, "allows_free_text": None})
        == expected
    )
    assert parse_ask_user_arguments({"question": "Why?", "choices": []}) == expected
    assert parse_ask_user_arguments({"question": "Ok?", "choices": ["y"]}).allows_free_text


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ("{not json", "arguments are not valid JSON"),
        ("[1]", "arguments must be a JSON object, got an array"),
        ({}, "question is required"),
        ({"question": None}, "question is required"),
        ({"question": 7}, "question must be a string, got the number 7"),
        ({"question": " \n"}, "question must not be blank"),
        (
            {"question": "Q", "choices": "eu"},
            "choices must be an array of strings or null, got a string",
        ),
        ({"question": "Q", "choices": ["eu", 1]}, "choices[1] must be a string, got the number 1"),
        ({"question": "Q", "choices": ["eu", " "]}, "choices[1] must not be blank"),
        ({"question": "Q", "choices": ["eu", "us", "eu"]}, "choices[2] repeats the choice 'eu'"),
        (
            {"question": "Q", "allows_free_text": "no"},
            "allows_free_text must be a boolean or null, got a string",
        ),
        (
            {"question": "Q", "allows_free_text": False},
            "allows_free_text is false, so choices must not be empty",
        ),
        (
            {"question": "Q", "choices": [], "allows_free_text": False},
            "allows_free_text is false, so choices must not be empty",
        ),
        ({"question": "Q", "choises": ["a"]}, "unknown argument 'choises'"),
    ],
)
def test_ask_user_invalid_arguments_have_exact_texts(arguments: object, reason: str) -> None:
    error = _error_of(lambda: parse_ask_user_arguments(arguments))  # type: ignore[arg-type]
    assert error == f"invalid ask_user arguments: {reason}"


def test_argument_errors_carry_tool_and_reason() -> None:
    with pytest.raises(BuiltInToolArgumentsError) as caught:
        parse_ask_user_arguments("{}")
    assert caught.value.tool is BuiltInTool.ASK_USER
    assert caught.value.reason == "question is required"
    assert isinstance(caught.value, ValueError)


# Question answers


def test_an_open_question_takes_any_non_blank_answer() -> None:
    assert is_allowed_question_answer("anything", choices=(), allows_free_text=True)
    # Without choices the question is open whatever allows_free_text says (a tool's question).
    assert is_allowed_question_answer("anything", choices=(), allows_free_text=False)
    assert not is_allowed_question_answer("", choices=(), allows_free_text=True)
    assert not is_allowed_question_answer(" \t\n", choices=(), allows_free_text=True)


def test_choices_without_free_text_take_only_an_exact_choice() -> None:
    def accepts(answer: str) -> bool:
        return is_allowed_question_answer(answer, choices=("eu", "us"), allows_free_text=False)

    assert accepts("eu")
    assert not accepts("EU")
    assert not accepts("asia")
    assert not accepts(" ")


def test_choices_with_free_text_take_other_answers() -> None:
    def accepts(answer: str) -> bool:
        return is_allowed_question_answer(answer, choices=("eu", "us"), allows_free_text=True)

    assert accepts("asia")
    assert not accepts("")


# durable_wait


@pytest.mark.parametrize("seconds", [1, 60, YEAR_SECONDS])
def test_durable_wait_accepts_whole_seconds_from_one_to_the_maximum(seconds: int) -> None:
    parsed = parse_durable_wait_arguments({"duration_seconds": seconds, "reason": "build runs"})
    assert parsed == DurableWaitArguments(seconds, "build runs")


def test_durable_wait_accepts_an_integral_float() -> None:
    assert parse_durable_wait_arguments('{"duration_seconds": 60.0, "reason": "r"}') == (
        DurableWaitArguments(60, "r")
    )


@pytest.mark.parametrize(
    ("duration", "reason"),
    [
        (0, f"duration_seconds must be from 1 to {YEAR_SECONDS}, got 0"),
        (-5, f"duration_seconds must be from 1 to {YEAR_SECONDS}, got -5"),
        (
            YEAR_SECONDS + 1,
            f"duration_seconds must be from 1 to {YEAR_SECONDS}, got {YEAR_SECONDS + 1}",
        ),
        (1.5, "duration_seconds must be a whole number of seconds, got 1.5"),
        ("60", "duration_seconds must be a whole number of seconds, got a string"),
        (True, "duration_seconds must be a whole number of seconds, got a boolean"),
        (None, "duration_seconds is required"),
    ],
)
def test_durable_wait_invalid_durations_have_exact_texts(duration: object, reason: str) -> None:
    error = _error_of(
        lambda: parse_durable_wait_arguments({"duration_seconds": duration, "reason": "r"})
    )
    assert error == f"invalid durable_wait arguments: {reason}"


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({"duration_seconds": 5}, "reason is required"),
        ({"duration_seconds": 5, "reason": ""}, "reason must not be blank"),
        ({"duration_seconds": 5, "reason": ["r"]}, "reason must be a string, got an array"),
        ({"duration_seconds": 5, "reason": "r", "until": 1}, "unknown argument 'until'"),
        ('"5"', "arguments must be a JSON object, got a string"),
        ("", "arguments are not valid JSON"),
        (
            '{"duration_seconds": NaN, "reason": "r"}',
            "duration_seconds must be a whole number of seconds, got nan",
        ),
    ],
)
def test_durable_wait_other_invalid_arguments(arguments: object, reason: str) -> None:
    error = _error_of(lambda: parse_durable_wait_arguments(arguments))  # type: ignore[arg-type]
    assert error == f"invalid durable_wait arguments: {reason}"


def test_durable_wait_maximum_follows_the_session_option() -> None:
    hour = timedelta(hours=1)
    assert parse_durable_wait_arguments(
        {"duration_seconds": 3600, "reason": "r"}, max_durable_wait=hour
    ) == DurableWaitArguments(3600, "r")
    error = _error_of(
        lambda: parse_durable_wait_arguments(
            {"duration_seconds": 3601, "reason": "r"}, max_durable_wait=hour
        )
    )
    assert (
        error == "invalid durable_wait arguments: duration_seconds must be from 1 to 3600, got 3601"
    )


def test_max_durable_wait_seconds() -> None:
    assert timedelta(days=365) == DEFAULT_MAX_DURABLE_WAIT
    assert max_durable_wait_seconds() == YEAR_SECONDS
    assert max_durable_wait_seconds(timedelta(seconds=1)) == 1
    assert max_durable_wait_seconds(timedelta(seconds=90.7)) == 90
    with pytest.raises(ConfigurationError, match="at least one second"):
        max_durable_wait_seconds(timedelta(milliseconds=999))
    with pytest.raises(ConfigurationError, match="at least one second"):
        max_durable_wait_seconds(timedelta(0))


def test_wait_until_and_remaining_whole_seconds() -> None:
    start = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    until = DurableWaitArguments(90, "r").wait_until(start)
    assert until == start + timedelta(seconds=90)
    assert remaining_wait_seconds(until, start) == 90
    assert remaining_wait_seconds(until, start + timedelta(seconds=89.5)) == 1
    assert remaining_wait_seconds(until, until) == 0
    assert remaining_wait_seconds(until, until + timedelta(days=1)) == 0


# write_todos


def test_write_todos_reads_tasks_in_order() -> None:
    parsed = parse_write_todos_arguments(
        {
            "todos": [
                {"content": "Back up", "status": "completed"},
                {"content": "Migrate", "status": "in_progress"},
                {"content": "Verify", "status": "pending"},
            ]
        }
    )
    assert parsed == WriteTodosArguments(
        (
            AgentTodo("Back up", TodoStatus.COMPLETED),
            AgentTodo("Migrate", TodoStatus.IN_PROGRESS),
            AgentTodo("Verify", TodoStatus.PENDING),
        )
    )
    assert parse_write_todos_arguments('{"todos": []}') == WriteTodosArguments(())


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ("nope", "arguments are not valid JSON"),
        ("null", "arguments must be a JSON object, got null"),
        ({}, "todos is required"),
        ({"todos": None}, "todos is required"),
        ({"todos": {"content": "a"}}, "todos must be an array, got an object"),
        (
            {"todos": ["Back up"]},
            "todos[0] must be an object with content and status, got a string",
        ),
        (
            {"todos": [{"content": "a", "status": "pending", "id": 1}]},
            "todos[0] has unknown field 'id'",
        ),
        ({"todos": [{"status": "pending"}]}, "todos[0].content must be a string, got null"),
        (
            {
                "todos": [
                    {"content": "a", "status": "pending"},
                    {"content": " ", "status": "pending"},
                ]
            },
            "todos[1].content must not be blank",
        ),
        (
            {"todos": [{"content": "a", "status": "done"}]},
            "todos[0].status must be one of pending, in_progress, completed, got 'done'",
        ),
        (
            {"todos": [{"content": "a"}]},
            "todos[0].status must be one of pending, in_progress, completed, got null",
        ),
        ({"todos": [], "merge": True}, "unknown argument 'merge'"),
    ],
)
def test_write_todos_invalid_arguments_have_exact_texts(arguments: object, reason: str) -> None:
    error = _error_of(lambda: parse_write_todos_arguments(arguments))  # type: ignore[arg-type]
    assert error == f"invalid todos: {reason}"


def test_more_than_one_write_todos_call_fails_each_of_them() -> None:
    assert WRITE_TODOS_CALLED_MORE_THAN_ONCE_ERROR == (
        "write_todos was called more than once in one response"
    )
    calls = [("a", "write_todos"), ("b", "search"), ("c", "write_todos"), ("d", "write_todos")]
    assert repeated_write_todos_call_ids(calls) == {"a", "c", "d"}
    assert repeated_write_todos_call_ids([("a", "write_todos"), ("b", "search")]) == frozenset()
    assert repeated_write_todos_call_ids([]) == frozenset()


def test_parse_built_in_tool_arguments_dispatches_by_tool() -> None:
    assert isinstance(
        parse_built_in_tool_arguments(BuiltInTool.ASK_USER, '{"question": "Q"}'), AskUserArguments
    )
    assert parse_built_in_tool_arguments(
        BuiltInTool.DURABLE_WAIT,
        '{"duration_seconds": 7200, "reason": "r"}',
        max_durable_wait=timedelta(hours=2),
    ) == DurableWaitArguments(7200, "r")
    assert parse_built_in_tool_arguments(BuiltInTool.WRITE_TODOS, {"todos": []}) == (
        WriteTodosArguments(())
    )
    error = _error_of(lambda: parse_built_in_tool_arguments(BuiltInTool.WRITE_TODOS, "{}"))
    assert error == "invalid todos: todos is required"


# Model-visible results


def test_ask_user_results_have_exact_texts() -> None:
    assert ask_user_answered_result("eu") == '{"status":"answered","answer":"eu"}'
    assert (
        ask_user_result(QuestionResolution.ANSWERED, "eu") == '{"status":"answered","answer":"eu"}'
    )
    assert QUESTION_DECLINED_RESULT == "The user declined to answer."
    assert ask_user_result(QuestionResolution.DECLINED) == "The user declined to answer."
    assert QUESTION_DEADLINE_PASSED_RESULT == "question deadline passed"
    assert ask_user_result(QuestionResolution.DEADLINE_PASSED) == "question deadline passed"
    with pytest.raises(ConfigurationError, match="needs its answer"):
        ask_user_result(QuestionResolution.ANSWERED)


def test_answer_text_is_escaped_as_json_and_keeps_non_ascii() -> None:
    result = ask_user_answered_result('Zürich, "today"\nplease')
    assert result == '{"status":"answered","answer":"Zürich, \\"today\\"\\nplease"}'
    assert json.loads(result) == {"status": "answered", "answer": 'Zürich, "today"\nplease'}


def test_durable_wait_result_has_the_exact_text() -> None:
    assert durable_wait_result(60, "build runs") == (
        '{"status":"completed","waited_seconds":60,"reason":"build runs"}'
    )
    assert json.loads(durable_wait_result(1, 'a "b"'))["reason"] == 'a "b"'


def test_cancelled_result_texts() -> None:
    # describe_tool_call_outcome gives them to a call steering or cancel_turn settled.
    assert STEERED_TOOL_RESULT == (
        '{"status":"cancelled","reason":"superseded_by_steered_user_message"}'
    )
    assert TURN_CANCELLED_TOOL_RESULT == '{"status":"cancelled","reason":"turn_cancelled_by_user"}'
