"""SearchFlows: the Dex visibility query language, evaluated over the engine's Flow runs.

Dex passes SearchFlows queries to its visibility store, whose language is SQL-like::

    ActiveStepTypes = "AwaitToolApproval"
    FlowType = 'AgentSession' AND ExecutionStatus = 'Running'
    OrderStatus IN ('paid', 'shipped') OR (Attempts >= 3 AND StartTime > '2026-01-01T00:00:00Z')
    CustomerId STARTS_WITH 'acme-' ORDER BY StartTime DESC

Supported: ``=``, ``!=`` (also ``<>``), ``>``, ``>=``, ``<``, ``<=``, ``[NOT] IN (...)``,
``[NOT] BETWEEN a AND b``, ``[NOT] STARTS_WITH 'prefix'``, ``IS [NOT] NULL``, ``AND``, ``OR``,
parentheses and a trailing ``ORDER BY key [ASC|DESC], ...``; keywords are case-insensitive,
strings take single or double quotes. An empty query matches every run. Searchable keys:

================================  ============  =============================================
key                               type          value
================================  ============  =============================================
``FlowType``                      keyword       the Flow type
``ActiveStepTypes``               keyword list  Step types indexed per ActiveStepSearchMode
``DexParentFlowID``               keyword       parent Flow ID of a child Flow
``FlowId`` / ``WorkflowId``       keyword       the Flow ID
``RunId``                         keyword       the run ID
``ExecutionStatus``               keyword       Running, Completed, Failed, Canceled,
                                                Terminated, TimedOut, ContinuedAsNew
``StartTime`` / ``CloseTime``     datetime      RFC 3339 text
any Attribute index key           its type      as indexed (``IndexType``)
================================  ============  =============================================

On a keyword list ``=`` means "contains" and ``!=`` "does not contain". A comparison with a key a
run does not have is false, except ``!=``, ``NOT ...`` and ``IS NULL``, which are true.
``=`` on a TEXT index matches when every word of the value occurs in the text.

Public API:

* :class:`FlowSearchRecord` -- what the engine builds per Flow run; :class:`IndexedValue`.
* :func:`indexed_value_from_write` -- the search value of an ``AttributeWrite`` (or None).
* :func:`parse_search_query` -- text to a :class:`SearchQuery` (a predicate plus ordering).
* :func:`search_flows` -- a whole SearchFlows call: filter, order, page, build the response.

Every malformed query raises ``EngineError`` INVALID_ARGUMENT naming the bad token and position.

Example::

    query = parse_search_query('ActiveStepTypes = "AwaitToolApproval"')
    waiting = [record for record in records if query.matches(record)]
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TypeAlias

from dex.dexpb import dex_pb2 as pb
from google.protobuf import timestamp_pb2

from dex_local_engine.errors import EngineError, invalid_argument

__all__ = [
    "DEFAULT_SEARCH_PAGE_SIZE",
    "MAX_QUERY_DEPTH",
    "FlowSearchRecord",
    "IndexedValue",
    "SearchQuery",
    "SearchValue",
    "SystemSearchKey",
    "indexed_value_from_write",
    "parse_search_query",
    "search_flows",
]

DEFAULT_SEARCH_PAGE_SIZE = 1000
"""Page size of a SearchFlows request that asks for 0, as in Dex."""

SearchValue: TypeAlias = str | int | float | bool | datetime | tuple[str, ...]
"""A searchable value: keyword/text str, int, float, bool, datetime or a keyword list."""


class SystemSearchKey(StrEnum):
    """Search keys every Flow run has, besides its indexed Attributes."""

    FLOW_TYPE = "FlowType"
    ACTIVE_STEP_TYPES = "ActiveStepTypes"
    PARENT_FLOW_ID = "DexParentFlowID"
    FLOW_ID = "FlowId"
    WORKFLOW_ID = "WorkflowId"
    RUN_ID = "RunId"
    EXECUTION_STATUS = "ExecutionStatus"
    START_TIME = "StartTime"
    CLOSE_TIME = "CloseTime"


@dataclass(frozen=True)
class IndexedValue:
    """One indexed Attribute's current search value and its index type."""

    index_type: pb.IndexType
    value: SearchValue


@dataclass(frozen=True)
class FlowSearchRecord:
    """What SearchFlows knows about one Flow run; the engine builds one per run it lists.

    ``indexed_attributes`` maps index keys to values (see :func:`indexed_value_from_write`);
    ``active_step_types`` holds the Step types the Flow's ActiveStepSearchMode indexes.
    """

    flow_id: str
    run_id: str
    flow_type: str
    status: pb.FlowStatus
    start_time: datetime
    close_time: datetime | None = None
    active_step_types: tuple[str, ...] = ()
    parent_flow_id: str = ""
    indexed_attributes: Mapping[str, IndexedValue] = field(default_factory=dict)


_STATUS_NAMES: dict[int, str] = {
    pb.FLOW_STATUS_RUNNING: "Running",
    pb.FLOW_STATUS_COMPLETED: "Completed",
    pb.FLOW_STATUS_FAILED: "Failed",
    pb.FLOW_STATUS_CANCELED: "Canceled",
    pb.FLOW_STATUS_TERMINATED: "Terminated",
    pb.FLOW_STATUS_SERVER_SIDE_TIMEOUT_INTERNAL_ONLY: "TimedOut",
    pb.FLOW_STATUS_CONTINUED_AS_NEW: "ContinuedAsNew",
}
_STATUS_BY_FOLDED_NAME = {
    re.sub(r"[_\s]", "", name).lower(): name for name in _STATUS_NAMES.values()
}

_SYSTEM_TYPES: dict[str, pb.IndexType] = {
    SystemSearchKey.FLOW_TYPE: pb.INDEX_TYPE_KEYWORD,
    SystemSearchKey.ACTIVE_STEP_TYPES: pb.INDEX_TYPE_KEYWORD_ARRAY,
    SystemSearchKey.PARENT_FLOW_ID: pb.INDEX_TYPE_KEYWORD,
    SystemSearchKey.FLOW_ID: pb.INDEX_TYPE_KEYWORD,
    SystemSearchKey.WORKFLOW_ID: pb.INDEX_TYPE_KEYWORD,
    SystemSearchKey.RUN_ID: pb.INDEX_TYPE_KEYWORD,
    SystemSearchKey.EXECUTION_STATUS: pb.INDEX_TYPE_KEYWORD,
    SystemSearchKey.START_TIME: pb.INDEX_TYPE_DATETIME,
    SystemSearchKey.CLOSE_TIME: pb.INDEX_TYPE_DATETIME,
}


# --- Attribute writes -> search values -----------------------------------------------------


def indexed_value_from_write(write: pb.AttributeWrite) -> tuple[str, IndexedValue | None] | None:
    """The index key and search value an Attribute write sets, as Dex derives them.

    Returns:
        None if the write is not indexed; ``(key, None)`` if it clears the index value (a null
        value, or a value that does not fit the index type); else ``(key, IndexedValue)``.
        The key is ``index_config.index_key``, or the Attribute key when that is empty.

    Example::

        key, value = indexed_value_from_write(write)  # ("OrderStatus", IndexedValue(KEYWORD, "paid"))
    """
    config = write.index_config
    if not write.HasField("index_config") or not config.enable:
        return None
    key = config.index_key or write.key
    index_type = config.type or _inferred_index_type(write.value)
    value = _search_value(write.value, index_type)
    return key, (None if value is None else IndexedValue(index_type, value))


def _inferred_index_type(value: pb.Value) -> pb.IndexType:
    kind = value.WhichOneof("kind")
    inferred: dict[str | None, pb.IndexType] = {
        "string_value": pb.INDEX_TYPE_KEYWORD,
        "obj_value": pb.INDEX_TYPE_KEYWORD,
        "int_value": pb.INDEX_TYPE_INT,
        "double_value": pb.INDEX_TYPE_DOUBLE,
        "bool_value": pb.INDEX_TYPE_BOOL,
    }
    return inferred.get(kind, pb.INDEX_TYPE_UNSPECIFIED)


def _value_text(value: pb.Value) -> str | None:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "obj_value":
        return value.obj_value.payload.decode("utf-8", errors="replace")
    return None


def _search_value(value: pb.Value, index_type: pb.IndexType) -> SearchValue | None:
    kind = value.WhichOneof("kind")
    text = _value_text(value)
    try:
        if index_type in (pb.INDEX_TYPE_KEYWORD, pb.INDEX_TYPE_TEXT):
            scalar: dict[str | None, Callable[[], str]] = {
                "int_value": lambda: str(value.int_value),
                "double_value": lambda: repr(value.double_value),
                "bool_value": lambda: str(value.bool_value).lower(),
            }
            return text if text is not None else scalar[kind]()
        if index_type == pb.INDEX_TYPE_KEYWORD_ARRAY:
            items = json.loads(text) if text is not None else None
            if isinstance(items, list) and all(isinstance(item, str) for item in items):
                return tuple(items)
            return None
        if index_type == pb.INDEX_TYPE_INT:
            return value.int_value if kind == "int_value" else int(text or "")
        if index_type == pb.INDEX_TYPE_DOUBLE:
            return value.double_value if kind == "double_value" else float(text or "")
        if index_type == pb.INDEX_TYPE_BOOL:
            return value.bool_value if kind == "bool_value" else _parse_bool(text or "")
        if index_type == pb.INDEX_TYPE_DATETIME and kind == "string_value":
            return _parse_datetime(value.string_value)
    except (KeyError, ValueError):
        return None
    return None


def _parse_bool(text: str) -> bool | None:
    """The boolean ``text`` spells, or None (the value is then not indexed)."""
    folded = text.strip().lower()
    if folded in ("true", "1", "t"):
        return True
    if folded in ("false", "0", "f"):
        return False
    return None


def _parse_datetime(text: str) -> datetime:
    parsed = datetime.fromisoformat(text.strip())
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


# --- Tokenizer -----------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
      | (?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
      | (?P<op>!=|<>|>=|<=|=|>|<|\(|\)|,)
      | (?P<word>`[^`]+`|[A-Za-z_][A-Za-z0-9_.]*)
      | (?P<bad>\S)
    )""",
    re.VERBOSE,
)
_KEYWORDS = frozenset(
    {"AND", "OR", "NOT", "IN", "BETWEEN", "IS", "NULL", "STARTS_WITH", "ORDER", "BY"}
    | {"ASC", "DESC", "TRUE", "FALSE"}
)


@dataclass(frozen=True)
class _Token:
    kind: str
    """string, number, op, keyword, key or end."""
    text: str
    position: int
    value: str | int | float | bool | None = None


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            break
        position = match.end()
        kind = match.lastgroup or "bad"
        raw = match.group(kind)
        start = match.start(kind)
        if kind == "bad":
            raise _syntax_error(text, start, f"unexpected character {raw!r}")
        tokens.append(_classify(kind, raw, start))
    tokens.append(_Token("end", "end of query", len(text)))
    return tokens


def _classify(kind: str, raw: str, start: int) -> _Token:
    if kind == "string":
        quote = raw[0]
        body = raw[1:-1].replace(quote * 2, quote)
        body = re.sub(r"\\(.)", r"\1", body)
        return _Token("string", raw, start, body)
    if kind == "number":
        number: int | float = float(raw) if re.search(r"[.eE]", raw) else int(raw)
        return _Token("number", raw, start, number)
    if kind == "op":
        return _Token("op", "!=" if raw == "<>" else raw, start)
    upper = raw.upper()
    if upper in ("TRUE", "FALSE"):
        return _Token("bool", raw, start, upper == "TRUE")
    if upper in _KEYWORDS:
        return _Token("keyword", upper, start)
    return _Token("key", raw.strip("`"), start)


_QUOTED_QUERY_CHARS = 200
"""Characters of a long query quoted in its error, around the bad token."""


def _quoted_query(text: str, position: int) -> str:
    """The query as an error quotes it: whole when short, else the part around ``position``."""
    if len(text) <= _QUOTED_QUERY_CHARS:
        return repr(text)
    start = max(0, position - _QUOTED_QUERY_CHARS // 2)
    excerpt = text[start : start + _QUOTED_QUERY_CHARS]
    return f"of {len(text):,} characters, near {excerpt!r},"


def _syntax_error(text: str, position: int, problem: str) -> EngineError:
    return invalid_argument(
        f"invalid search query {_quoted_query(text, position)} at position {position}: {problem}"
    )


# --- Query model ---------------------------------------------------------------------------

_Literal: TypeAlias = str | int | float | bool
_Predicate: TypeAlias = Callable[[FlowSearchRecord], bool]


@dataclass(frozen=True)
class _OrderKey:
    key: str
    descending: bool


@dataclass(frozen=True)
class SearchQuery:
    """A parsed SearchFlows query: a predicate over records and the requested order."""

    text: str
    predicate: _Predicate
    order: tuple[_OrderKey, ...] = ()

    def matches(self, record: FlowSearchRecord) -> bool:
        """Whether the run satisfies the query.

        Raises:
            EngineError: INVALID_ARGUMENT when a literal cannot be compared with the record's
                value of that key (e.g. ``Attempts = 'many'`` on an INT index).
        """
        return self.predicate(record)

    def __call__(self, record: FlowSearchRecord) -> bool:
        return self.predicate(record)

    def sorted(self, records: Iterable[FlowSearchRecord]) -> list[FlowSearchRecord]:
        """The records in the query's ORDER BY order, else newest start first."""
        ordered = sorted(records, key=lambda record: (record.run_id, record.flow_id))
        order = self.order or (_OrderKey(SystemSearchKey.START_TIME, True),)
        for order_key in reversed(order):
            present = [r for r in ordered if _field(r, order_key.key) is not None]
            missing = [r for r in ordered if _field(r, order_key.key) is None]
            present.sort(key=lambda r: _sort_key(r, order_key.key), reverse=order_key.descending)
            ordered = present + missing
        return ordered


def _sort_key(record: FlowSearchRecord, key: str) -> tuple[int, str | int | float]:
    found = _field(record, key)
    assert found is not None
    value = found.value
    if isinstance(value, datetime):
        return (0, value.timestamp())
    if isinstance(value, bool | int | float):
        return (0, float(value))
    if isinstance(value, tuple):
        return (1, ",".join(value))
    return (1, value)


def _field(record: FlowSearchRecord, key: str) -> IndexedValue | None:
    system: dict[str, Callable[[], SearchValue | None]] = {
        SystemSearchKey.FLOW_TYPE: lambda: record.flow_type,
        SystemSearchKey.ACTIVE_STEP_TYPES: lambda: record.active_step_types or None,
        SystemSearchKey.PARENT_FLOW_ID: lambda: record.parent_flow_id or None,
        SystemSearchKey.FLOW_ID: lambda: record.flow_id,
        SystemSearchKey.WORKFLOW_ID: lambda: record.flow_id,
        SystemSearchKey.RUN_ID: lambda: record.run_id,
        SystemSearchKey.EXECUTION_STATUS: lambda: _STATUS_NAMES.get(record.status, "Unknown"),
        SystemSearchKey.START_TIME: lambda: record.start_time,
        SystemSearchKey.CLOSE_TIME: lambda: record.close_time,
    }
    if key in system:
        value = system[key]()
        return None if value is None else IndexedValue(_SYSTEM_TYPES[key], value)
    return record.indexed_attributes.get(key)


# --- Parser --------------------------------------------------------------------------------

MAX_QUERY_DEPTH = 64
"""Deepest nesting of parentheses a query may use (the parser and the predicates recurse)."""


class _Parser:
    def __init__(self, text: str, known_keys: Mapping[str, pb.IndexType] | None) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.index = 0
        self.known_keys = known_keys
        self.depth = 0
        """Open parentheses around the current token."""

    @property
    def current(self) -> _Token:
        return self.tokens[self.index]

    def advance(self) -> _Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def at(self, kind: str, *texts: str) -> bool:
        token = self.current
        return token.kind == kind and (not texts or token.text in texts)

    def expect(self, kind: str, *texts: str, what: str) -> _Token:
        if not self.at(kind, *texts):
            raise self.error(f"expected {what}")
        return self.advance()

    def error(self, problem: str) -> EngineError:
        token = self.current
        found = "end of query" if token.kind == "end" else repr(token.text)
        return _syntax_error(self.text, token.position, f"{problem}, found {found}")

    def parse(self) -> SearchQuery:
        predicate: _Predicate = _always
        if not self.at("end") and not self.at("keyword", "ORDER"):
            predicate = self.parse_or()
        order = self.parse_order() if self.at("keyword", "ORDER") else ()
        if not self.at("end"):
            raise self.error("expected AND, OR, ORDER BY or the end of the query")
        return SearchQuery(self.text, predicate, order)

    def parse_or(self) -> _Predicate:
        return self.parse_joined("OR", self.parse_and, _any_of)

    def parse_and(self) -> _Predicate:
        return self.parse_joined("AND", self.parse_primary, _all_of)

    def parse_joined(
        self,
        keyword: str,
        parse_part: Callable[[], _Predicate],
        join: Callable[[tuple[_Predicate, ...]], _Predicate],
    ) -> _Predicate:
        """``part (keyword part)*``: a lone part as it is, several parts ``join``-ed."""
        parts = [parse_part()]
        while self.at("keyword", keyword):
            self.advance()
            parts.append(parse_part())
        return parts[0] if len(parts) == 1 else join(tuple(parts))

    def parse_primary(self) -> _Predicate:
        if self.at("op", "("):
            if self.depth >= MAX_QUERY_DEPTH:
                raise self.error(f"parentheses nest deeper than {MAX_QUERY_DEPTH} levels")
            self.advance()
            self.depth += 1
            inner = self.parse_or()
            self.depth -= 1
            self.expect("op", ")", what="')'")
            return inner
        key_token = self.expect("key", what="a search attribute name or '('")
        key = self.check_key(key_token)
        if self.at("op", "=", "!=", ">", ">=", "<", "<="):
            operator = self.advance().text
            return _comparison(key, operator, self.literal(key))
        if self.at("keyword", "IS"):
            self.advance()
            negated = self.skip_not()
            self.expect("keyword", "NULL", what="NULL")
            return _is_null(key, negated)
        negated = self.skip_not()
        if self.at("keyword", "IN"):
            self.advance()
            return _negate_if(negated, _in(key, self.literal_list(key)))
        if self.at("keyword", "BETWEEN"):
            self.advance()
            low = self.literal(key)
            self.expect("keyword", "AND", what="AND")
            return _negate_if(negated, _between(key, low, self.literal(key)))
        if self.at("keyword", "STARTS_WITH"):
            self.advance()
            prefix = self.expect("string", what="a quoted prefix").value
            return _negate_if(negated, _starts_with(key, str(prefix)))
        raise self.error(
            f"expected an operator after {key_token.text!r} (=, !=, >, >=, <, <=, IN, "
            "BETWEEN, STARTS_WITH or IS NULL)"
        )

    def skip_not(self) -> bool:
        if self.at("keyword", "NOT"):
            self.advance()
            return True
        return False

    def check_key(self, token: _Token) -> str:
        key = token.text
        if key in _SYSTEM_TYPES or self.known_keys is None or key in self.known_keys:
            return key
        raise _syntax_error(
            self.text, token.position, f"unknown search attribute {key!r} (not an indexed key)"
        )

    def literal(self, key: str) -> _Literal:
        token = self.current
        if token.kind not in ("string", "number", "bool"):
            raise self.error(f"expected a value for {key!r}")
        self.advance()
        assert token.value is not None
        value = token.value
        if key == SystemSearchKey.EXECUTION_STATUS:
            return self.status_literal(token)
        index_type = _SYSTEM_TYPES.get(key) or (self.known_keys or {}).get(key)
        if index_type is not None:
            _coerce(value, index_type, key, token, self.text)
        return value

    def status_literal(self, token: _Token) -> str:
        folded = re.sub(r"[_\s]", "", str(token.value)).lower()
        if folded not in _STATUS_BY_FOLDED_NAME:
            names = ", ".join(_STATUS_NAMES.values())
            raise _syntax_error(
                self.text,
                token.position,
                f"unknown ExecutionStatus {token.text}; expected one of {names}",
            )
        return _STATUS_BY_FOLDED_NAME[folded]

    def literal_list(self, key: str) -> tuple[_Literal, ...]:
        self.expect("op", "(", what="'(' after IN")
        values = [self.literal(key)]
        while self.at("op", ","):
            self.advance()
            values.append(self.literal(key))
        self.expect("op", ")", what="',' or ')'")
        return tuple(values)

    def parse_order(self) -> tuple[_OrderKey, ...]:
        self.advance()
        self.expect("keyword", "BY", what="BY after ORDER")
        keys = [self.order_key()]
        while self.at("op", ","):
            self.advance()
            keys.append(self.order_key())
        return tuple(keys)

    def order_key(self) -> _OrderKey:
        key = self.check_key(self.expect("key", what="a search attribute name to order by"))
        descending = False
        if self.at("keyword", "ASC", "DESC"):
            descending = self.advance().text == "DESC"
        return _OrderKey(key, descending)


def parse_search_query(
    text: str, known_keys: Mapping[str, pb.IndexType] | None = None
) -> SearchQuery:
    """Parse a SearchFlows query.

    Args:
        text: The query; empty (or only ``ORDER BY``) matches every run.
        known_keys: Index keys and types synced with ``SyncAttributeIndex``; when given, a key
            that is neither a system key nor in it is rejected, and literals are type-checked.

    Raises:
        EngineError: INVALID_ARGUMENT naming the bad token and its position.

    Example::

        parse_search_query("FlowType = 'AgentSession' AND ActiveStepTypes = 'AwaitUserMessage'")
    """
    return _Parser(text, known_keys).parse()


# --- Predicates ----------------------------------------------------------------------------


def _always(record: FlowSearchRecord) -> bool:
    return True


def _any_of(parts: tuple[_Predicate, ...]) -> _Predicate:
    return lambda record: any(part(record) for part in parts)


def _all_of(parts: tuple[_Predicate, ...]) -> _Predicate:
    return lambda record: all(part(record) for part in parts)


def _negate_if(negated: bool, predicate: _Predicate) -> _Predicate:
    return (lambda record: not predicate(record)) if negated else predicate


def _is_null(key: str, negated: bool) -> _Predicate:
    return lambda record: (_field(record, key) is None) != negated


def _coerce(
    literal: _Literal, index_type: pb.IndexType, key: str, token: _Token | None, text: str
) -> SearchValue:
    try:
        if index_type in (pb.INDEX_TYPE_KEYWORD, pb.INDEX_TYPE_TEXT, pb.INDEX_TYPE_KEYWORD_ARRAY):
            if isinstance(literal, bool):
                return str(literal).lower()
            return str(literal)
        if index_type == pb.INDEX_TYPE_INT and not isinstance(literal, bool | float):
            return int(literal)
        if index_type == pb.INDEX_TYPE_DOUBLE and not isinstance(literal, bool):
            return float(literal)
        if index_type == pb.INDEX_TYPE_BOOL:
            parsed = literal if isinstance(literal, bool) else _parse_bool(str(literal))
            if parsed is not None:
                return parsed
        if index_type == pb.INDEX_TYPE_DATETIME and isinstance(literal, str):
            return _parse_datetime(literal)
    except ValueError:
        pass
    position = token.position if token is not None else 0
    where = f" at position {position}" if token is not None else ""
    type_name = pb.IndexType.Name(index_type).removeprefix("INDEX_TYPE_")
    raise invalid_argument(
        f"invalid search query {_quoted_query(text, position)}{where}: {literal!r} is not a "
        f"{type_name} value for {key!r}"
    )


def _compare_scalar(field_value: SearchValue, operator: str, literal: SearchValue) -> bool:
    if operator == "=":
        return field_value == literal
    if operator == "!=":
        return field_value != literal
    ordered = (field_value, literal)
    if any(isinstance(value, tuple) for value in ordered):
        return False
    comparisons: dict[str, Callable[[object, object], bool]] = {
        ">": lambda a, b: a > b,  # type: ignore[operator]
        ">=": lambda a, b: a >= b,  # type: ignore[operator]
        "<": lambda a, b: a < b,  # type: ignore[operator]
        "<=": lambda a, b: a <= b,  # type: ignore[operator]
    }
    return comparisons[operator](field_value, literal)


def _text_matches(text: str, phrase: str) -> bool:
    words = set(re.findall(r"\w+", text.lower()))
    return all(word in words for word in re.findall(r"\w+", phrase.lower()))


def _comparison(key: str, operator: str, literal: _Literal) -> _Predicate:
    def predicate(record: FlowSearchRecord) -> bool:
        found = _field(record, key)
        if found is None:
            return operator == "!="
        expected = _coerce(literal, found.index_type, key, None, f"{key} {operator} {literal!r}")
        actual = found.value
        if isinstance(actual, tuple):
            contained = expected in actual
            if operator in ("=", "!="):
                return contained == (operator == "=")
            return any(_compare_scalar(item, operator, expected) for item in actual)
        if found.index_type == pb.INDEX_TYPE_TEXT and operator in ("=", "!="):
            return _text_matches(str(actual), str(expected)) == (operator == "=")
        return _compare_scalar(actual, operator, expected)

    return predicate


def _in(key: str, literals: Sequence[_Literal]) -> _Predicate:
    equals = tuple(_comparison(key, "=", literal) for literal in literals)
    return lambda record: any(check(record) for check in equals)


def _between(key: str, low: _Literal, high: _Literal) -> _Predicate:
    at_least = _comparison(key, ">=", low)
    at_most = _comparison(key, "<=", high)
    return lambda record: at_least(record) and at_most(record)


def _starts_with(key: str, prefix: str) -> _Predicate:
    def predicate(record: FlowSearchRecord) -> bool:
        found = _field(record, key)
        if found is None:
            return False
        values = found.value if isinstance(found.value, tuple) else (found.value,)
        return any(isinstance(value, str) and value.startswith(prefix) for value in values)

    return predicate


# --- The SearchFlows call ------------------------------------------------------------------


def search_flows(
    records: Iterable[FlowSearchRecord],
    request: pb.SearchFlowsRequest,
    known_keys: Mapping[str, pb.IndexType] | None = None,
) -> pb.SearchFlowsResponse:
    """Answer a SearchFlows request over ``records`` (the runs the request may see).

    Pass only each Flow's latest run unless ``request.include_continued_as_new``. Pages are
    offsets into the ordered result; the page token is bound to the query text.

    Raises:
        EngineError: INVALID_ARGUMENT for a negative page size, a malformed query or a page
            token of another query.
    """
    if request.page_size < 0:
        raise invalid_argument(f"page size must be non-negative, got {request.page_size}")
    query = parse_search_query(request.query, known_keys)
    offset = _decode_page_token(request.next_page_token, request.query)
    page_size = request.page_size or DEFAULT_SEARCH_PAGE_SIZE
    matching = query.sorted(record for record in records if query.matches(record))
    page = matching[offset : offset + page_size]
    next_offset = offset + len(page)
    next_token = (
        _encode_page_token(request.query, next_offset) if next_offset < len(matching) else ""
    )
    return pb.SearchFlowsResponse(
        flow_runs=[_entry(record) for record in page], next_page_token=next_token
    )


def _query_digest(query: str) -> str:
    return hashlib.sha256(query.encode()).hexdigest()[:16]


def _encode_page_token(query: str, offset: int) -> str:
    payload = json.dumps({"q": _query_digest(query), "o": offset}, separators=(",", ":"))
    return base64.urlsafe_b64encode(payload.encode()).rstrip(b"=").decode()


def _decode_page_token(token: str, query: str) -> int:
    if not token:
        return 0
    try:
        padded = token + "=" * (-len(token) % 4)
        fields = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        digest, offset = fields["q"], int(fields["o"])
    except (ValueError, KeyError, TypeError, UnicodeError, binascii.Error):
        raise invalid_argument("invalid SearchFlows next_page_token") from None
    if digest != _query_digest(query) or offset < 0:
        raise invalid_argument("SearchFlows next_page_token belongs to another query")
    return offset


def _timestamp(moment: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(moment.astimezone(UTC).replace(tzinfo=None))
    return stamp


def _entry(record: FlowSearchRecord) -> pb.SearchFlowsResponseEntry:
    entry = pb.SearchFlowsResponseEntry(
        flow_id=record.flow_id,
        run_id=record.run_id,
        flow_type=record.flow_type,
        flow_status=record.status,
        start_time=_timestamp(record.start_time),
        indexed_attributes=[
            pb.KV(key=key, value=_wire_value(indexed))
            for key, indexed in sorted(_entry_attributes(record).items())
        ],
    )
    if record.close_time is not None:
        entry.close_time.CopyFrom(_timestamp(record.close_time))
    return entry


def _entry_attributes(record: FlowSearchRecord) -> dict[str, IndexedValue]:
    attributes = dict(record.indexed_attributes)
    attributes[SystemSearchKey.FLOW_TYPE] = IndexedValue(pb.INDEX_TYPE_KEYWORD, record.flow_type)
    if record.active_step_types:
        attributes[SystemSearchKey.ACTIVE_STEP_TYPES] = IndexedValue(
            pb.INDEX_TYPE_KEYWORD_ARRAY, record.active_step_types
        )
    if record.parent_flow_id:
        attributes[SystemSearchKey.PARENT_FLOW_ID] = IndexedValue(
            pb.INDEX_TYPE_KEYWORD, record.parent_flow_id
        )
    return attributes


def _wire_value(indexed: IndexedValue) -> pb.Value:
    value = indexed.value
    if isinstance(value, tuple):
        payload = json.dumps(list(value), separators=(",", ":")).encode()
        return pb.Value(obj_value=pb.EncodedObject(encoding="json", payload=payload))
    if isinstance(value, datetime):
        return pb.Value(string_value=value.astimezone(UTC).isoformat().replace("+00:00", "Z"))
    if isinstance(value, bool):
        return pb.Value(bool_value=value)
    if isinstance(value, int):
        return pb.Value(int_value=value)
    if isinstance(value, float):
        return pb.Value(double_value=value)
    return pb.Value(string_value=value)
