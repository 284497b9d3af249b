"""The root README's compatibility table, made from the published packages' ``pyproject.toml``.

One row per published package: what it requires outside the line (an adapter's framework, the
Dex SDK) with the range it was tested with, its extras, and its Python versions. The version-line
test checks that the README carries exactly this table, so a changed range or a new package
shows there; ``python -m release_train compatibility-table`` prints it.
"""

from __future__ import annotations

from collections.abc import Sequence

from dex_agents._release_line import is_line_distribution, parse_requirement, specifier_text

from release_train._workspace import WorkspaceMember

__all__ = ["COMPATIBILITY_HEADING", "compatibility_table"]

COMPATIBILITY_HEADING = "## Compatibility"


def _requirements(member: WorkspaceMember, texts: Sequence[str]) -> list[str]:
    shown = []
    for text in texts:
        requirement = parse_requirement(text, member.name)
        if is_line_distribution(requirement.name):
            continue
        extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
        marker = f"; {requirement.marker}" if requirement.marker else ""
        shown.append(f"`{requirement.name}{extras}{specifier_text(requirement.specifier)}{marker}`")
    return shown


def _row(member: WorkspaceMember) -> str:
    requires = ", ".join(_requirements(member, member.dependencies)) or "-"
    extras = "; ".join(
        f"`{extra}`: {', '.join(_requirements(member, texts))}"
        for extra, texts in sorted(member.optional_dependencies.items())
    )
    return f"| `{member.name}` | {requires} | {extras or '-'} | {member.requires_python} |"


def compatibility_table(members: Sequence[WorkspaceMember]) -> str:
    """The Markdown table of the published ``members``, sorted by name."""
    rows = [
        "| Package | Requires (tested range) | Extras | Python |",
        "|---|---|---|---|",
        *(_row(m) for m in sorted(members, key=lambda m: m.name) if m.published),
    ]
    return "\n".join(rows) + "\n"
