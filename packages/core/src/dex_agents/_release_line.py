"""The release line: every dex-agents package carries one version and pins the others to it.

The line's packages are ``dex-agents``, ``dex-local-engine`` and every ``dex-agents-*``
distribution. ``dex-agents doctor`` applies these rules to the installed distributions, and the
repository's version-line test applies the same rules to the workspace's ``pyproject.toml`` files.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from dex_agents.exceptions import ConfigurationError

__all__ = [
    "CORE_DISTRIBUTION",
    "LineDistribution",
    "is_line_distribution",
    "line_problems",
    "parse_requirement",
    "specifier_text",
]

CORE_DISTRIBUTION = "dex-agents"
_LINE_DISTRIBUTIONS = frozenset({CORE_DISTRIBUTION, "dex-local-engine"})
_LINE_PREFIX = f"{CORE_DISTRIBUTION}-"


def is_line_distribution(name: str) -> bool:
    """Whether the distribution ``name`` (any spelling) belongs to the dex-agents release line.

    Example:
        >>> is_line_distribution("Dex_Agents_LangGraph"), is_line_distribution("dex-python-sdk")
        (True, False)
    """
    normalized = canonicalize_name(name)
    return normalized in _LINE_DISTRIBUTIONS or normalized.startswith(_LINE_PREFIX)


@dataclass(frozen=True)
class LineDistribution:
    """One package of the line: its name, version and requirements (PEP 508 strings)."""

    name: str
    version: str
    requirements: tuple[str, ...]


def parse_requirement(text: str, owner: str) -> Requirement:
    """Parse one PEP 508 requirement of the distribution ``owner``.

    Raises:
        ConfigurationError: ``text`` is not a requirement (a ``ValueError``); the message names
            ``owner`` and the text.
    """
    try:
        return Requirement(text)
    except InvalidRequirement as error:
        raise ConfigurationError(
            f"{owner} has a requirement that is not PEP 508: {text!r}: {error}"
        ) from None


# Lower bounds first, as people write ranges: ">=1.2,<1.3", not packaging's sorted "<1.3,>=1.2".
_OPERATOR_ORDER = ("===", "==", "~=", ">=", ">", "!=", "<=", "<")


def specifier_text(specifier: SpecifierSet) -> str:
    """``specifier`` as a range reads, lower bound first.

    Example:
        >>> specifier_text(SpecifierSet("<1.3,>=1.2"))
        '>=1.2,<1.3'
    """
    return ",".join(
        str(item)
        for item in sorted(
            specifier, key=lambda item: (_OPERATOR_ORDER.index(item.operator), item.version)
        )
    )


def line_problems(distributions: Iterable[LineDistribution], line: str) -> tuple[str, ...]:
    """What keeps ``distributions`` off the ``line`` version, one sentence per problem.

    A distribution whose version is not ``line``, and a requirement on a line distribution that is
    not exactly ``==<line>`` (a range, a direct reference or no version at all), are problems.

    Raises:
        ValueError: A requirement is not PEP 508.

    Example:
        >>> adapter = LineDistribution("dex-agents-x", "0.3.0", ("dex-agents>=0.2",))
        >>> line_problems([adapter], "0.3.0")
        ('dex-agents-x requires dex-agents>=0.2; pin it to dex-agents==0.3.0',)
    """
    problems: list[str] = []
    for distribution in distributions:
        if distribution.version != line:
            problems.append(
                f"{distribution.name} is {distribution.version}, not on the {line} line of "
                f"{CORE_DISTRIBUTION}"
            )
        for text in distribution.requirements:
            requirement = parse_requirement(text, distribution.name)
            if not is_line_distribution(requirement.name):
                continue
            if requirement.url is not None or str(requirement.specifier) != f"=={line}":
                problems.append(
                    f"{distribution.name} requires {text}; pin it to {requirement.name}=={line}"
                )
    return tuple(problems)
