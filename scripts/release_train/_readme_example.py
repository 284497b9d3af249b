"""A package README's complete example: the first ``python`` block of its example section.

Every adapter's README has a section ``## Example`` or ``## A complete example`` whose first
```` ```python ```` block is a whole program that runs against ``dex-local-engine`` (each adapter's
own docs test runs it from the workspace). Some start the embedded engine themselves; others say
"start an engine in one terminal" and connect to ``127.0.0.1:8801``: for those, the release check
starts one on a free port and puts its address in place of that one, as the docs tests do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EXAMPLE_HEADINGS", "README_ENGINE_ADDRESS", "ReadmeExample", "readme_example"]

EXAMPLE_HEADINGS = ("Example", "A complete example")
README_ENGINE_ADDRESS = "127.0.0.1:8801"
_SECTION = re.compile(r"^## (.+?)[ \t]*$", re.MULTILINE)
# Exactly "```python": a block marked "```python notest" is a fragment, not the example.
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class ReadmeExample:
    """The example program of one README."""

    readme: Path
    heading: str
    source: str

    @property
    def needs_engine(self) -> bool:
        """Whether it connects to an engine at ``README_ENGINE_ADDRESS`` that someone started."""
        return README_ENGINE_ADDRESS in self.source

    def connected_to(self, address: str) -> str:
        """The program with ``address`` in place of ``README_ENGINE_ADDRESS``."""
        return self.source.replace(README_ENGINE_ADDRESS, address)


def readme_example(readme: Path) -> ReadmeExample | None:
    """The first python block of the README's example section, or None when it has none."""
    text = readme.read_text()
    sections = list(_SECTION.finditer(text))
    for index, section in enumerate(sections):
        if section.group(1) not in EXAMPLE_HEADINGS:
            continue
        end = sections[index + 1].start() if index + 1 < len(sections) else len(text)
        block = _PYTHON_BLOCK.search(text, section.end(), end)
        if block is not None:
            return ReadmeExample(readme, section.group(1), block.group(1))
    return None
