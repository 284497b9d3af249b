"""The kit's checks of what a README example and an example script print."""

from __future__ import annotations

from pathlib import Path

import pytest
from dex_agents.testing import (
    ExampleScriptError,
    check_readme_example_output,
    printed_section,
    readme_shown_output,
)

EXAMPLE = """## Example
```python
import pathlib
runs = pathlib.Path("runs.txt")
number = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(number))
print(f"run {number}")
```
It prints:
```text
run 1
```
and a second run, which finds the first one's file:
```text
{second}
```
## Next
```text
not the example's
```
"""


def _readme(directory: Path, second: str) -> Path:
    readme = directory / "README.md"
    readme.write_text(EXAMPLE.replace("{second}", second))
    return readme


def test_each_run_prints_the_block_the_readme_shows_for_it(tmp_path: Path) -> None:
    readme = _readme(tmp_path, "run 2")

    assert readme_shown_output(readme, "Example") == [["run 1"], ["run 2"]]
    assert check_readme_example_output(readme, tmp_path, "Example") == [["run 1"], ["run 2"]]


def test_a_run_that_prints_other_lines_fails_showing_both(tmp_path: Path) -> None:
    readme = _readme(tmp_path, "run 1")

    with pytest.raises(ExampleScriptError, match=r"run 2 .*\nshown:\nrun 1\nprinted:\nrun 2"):
        check_readme_example_output(readme, tmp_path, "Example")


def test_a_readme_that_shows_no_output_is_an_error(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("## Example\n```python\nprint(1)\n```\n")

    with pytest.raises(ExampleScriptError, match="shows no output"):
        readme_shown_output(readme, "Example")


def test_a_printed_section_ends_at_the_next_unindented_line() -> None:
    output = "Events:\n  turn_started\n\n  turn_completed\n\nStored messages:\n  1 user: hi\n"

    assert printed_section(output, "Events:") == ["  turn_started", "", "  turn_completed"]
    assert printed_section(output, "Stored messages:") == ["  1 user: hi"]
    with pytest.raises(ExampleScriptError, match="no line 'Messages:'"):
        printed_section(output, "Messages:")
